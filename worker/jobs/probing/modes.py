"""`probe.mode`: which search finds the largest size that fits.

- `predict` (the default): padbench's own search (`search.search_limit`), which fits memory against size through
  the peaks each probe measured and spends ~6 probes where doubling and bisection spend ~11;
- `power` and `binsearch`: the two modes of PyTorch Lightning's `BatchSizeFinder` (`scale_batch_size`), for
  users who know them and to compare with them. `power` doubles the size until it runs out of memory and keeps
  the last size that fit; `binsearch` doubles the same way, then bisects between the last fit and the first
  out-of-memory until they are neighbours.
  https://lightning.ai/docs/pytorch/stable/api/lightning.pytorch.callbacks.BatchSizeFinder.html

Every mode starts at size 1 (a job must fit one row), stays at or below the ceiling and goes through the same
oracle, so each attempt is a child process and lands in the report alike. The job's margin is applied to the
bracket each mode leaves (`search.choose_size`), whatever the mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from padbench.contract.spec import ProbeMode
from padbench.worker.jobs.probing.curves import MemoryCurve
from padbench.worker.jobs.probing.search import Reading, SearchResult, search_limit

Oracle = Callable[[int], Reading]


class Search(Protocol):
    def __call__(self, probe: Oracle, *, curve: MemoryCurve, ceiling: int) -> SearchResult: ...


def search_power(probe: Oracle, *, curve: MemoryCurve, ceiling: int) -> SearchResult:
    """Double from 1 until a size runs out of memory (or the ceiling fits); the last fit is the limit."""
    largest_fit, size, probed = 0, 1, []
    while True:
        probed.append(size)
        if not probe(size).fits:
            return SearchResult(largest_fit=largest_fit, smallest_oom=size, predicted_limit=None, probed=probed)
        largest_fit = size
        if size >= ceiling:
            return SearchResult(largest_fit=size, smallest_oom=None, predicted_limit=None, probed=probed)
        size = min(2 * size, ceiling)


def search_binsearch(probe: Oracle, *, curve: MemoryCurve, ceiling: int) -> SearchResult:
    """`power` until the first out-of-memory, then bisect the bracket until its ends are neighbours."""
    doubled = search_power(probe, curve=curve, ceiling=ceiling)
    low, high, probed = doubled.largest_fit, doubled.smallest_oom, list(doubled.probed)
    while high is not None and low > 0 and high - low > 1:
        size = (low + high) // 2
        probed.append(size)
        if probe(size).fits:
            low = size
        else:
            high = size
    return SearchResult(largest_fit=low, smallest_oom=high, predicted_limit=None, probed=probed)


def _predict(probe: Oracle, *, curve: MemoryCurve, ceiling: int) -> SearchResult:
    return search_limit(probe, curve=curve, ceiling=ceiling)


SEARCHES: dict[ProbeMode, Search] = {"predict": _predict, "power": search_power, "binsearch": search_binsearch}
