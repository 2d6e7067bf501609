"""`batch_size: auto:N` over the data's lengths: N tiers of sequences, each with the batch size probed for it.

lm-eval-harness's `--batch_size auto:N` sorts its requests longest first and chooses the largest batch that fits
N times as it goes, since shorter requests leave room for larger batches
(https://github.com/EleutherAI/lm-evaluation-harness/blob/main/docs/interface.md). padbench's layouts are not
run in length order, but one of them batches by length: binned, whose batches are as wide as the longest
sequence of their bin. Its sequences are split into N tiers of equal count by length; the probe finds the
largest batch of rows as wide as each tier's longest, and binned batches each tier at its own size. The other
layouts' batches all share one worst case (max_length rows, or a full pack), so for them `auto:N` is one size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import Batch

# (longest sequence of the tier in tokens, batch size), shortest tier first
Tiers = Sequence[tuple[int, int]]


@runtime_checkable
class TieredStrategy(Protocol):
    """A strategy whose batches' memory follows the lengths it groups: it takes a batch size per length tier."""

    def tiered_batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, tiers: Tiers,
                       max_length: int, pad_token_id: int, seed: int) -> Iterator[Batch]: ...


def length_tiers(lengths: Sequence[int], times: int) -> list[tuple[int, int]]:
    """Up to `times` tiers of about equal count, as (longest, sequences), shortest first; tiers whose longest
    sequence is the same are one tier (a batch of them is as wide either way)."""
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))
    tiers: dict[int, int] = {}
    for part in np.array_split(ordered, min(times, len(ordered))):
        longest = int(part[-1])
        tiers[longest] = tiers.get(longest, 0) + len(part)
    return sorted(tiers.items())


def tier_of(lengths: np.ndarray, tiers: Tiers) -> np.ndarray:
    """Each sequence's tier: the first whose longest holds it (anything longer goes to the last)."""
    bounds = np.asarray([longest for longest, _ in tiers], dtype=np.int64)
    return np.minimum(np.searchsorted(bounds, lengths, side="left"), len(bounds) - 1)
