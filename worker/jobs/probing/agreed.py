"""The OOM probe of a job on several ranks: a size fits only where it fits on every rank.

Every rank probes in children of its own, on its own GPU, trying the same size at the same time. A model
sharded over the ranks is sharded over their probe children too: those children form a process group of their
own for each attempt (see `ProbeGroup`), so a child that runs out of memory leaves the others waiting in a
collective. The rank whose child ended raises a flag in the job's store, and every rank stops its child when it
sees it; then the ranks compare what their children said. Out of memory anywhere is out of memory for the job;
anything else that is not a fit (a crash, a timeout) stops the probe on every rank alike. The ranks combine
their readings (the highest peak, the least capacity), so each rank's search takes the same next step.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.jobs.probing.oracle import ChildOracle, ProbeFailed, reading_of
from padbench.worker.jobs.probing.search import Reading
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.runtime.messages import first_line

STORE_TIMEOUT_S = 60.0

# One rank's attempt as the others learn it: how its child ended, its reading when it fit, its error line.
RankAttempt = tuple[str, Reading | None, str | None]


class AttemptFlags:
    """Flags in the job's store (the one its ranks met through) that say an attempt ended badly somewhere."""

    def __init__(self, namespace: str) -> None:
        host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        client = dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=STORE_TIMEOUT_S))
        self.store = dist.PrefixStore(f"padbench-probe-flags/{namespace}", client)

    def raise_flag(self, key: str) -> None:
        self.store.set(key, "ended")

    def raised(self, key: str) -> bool:
        return bool(self.store.check([key]))


def store_address() -> tuple[str, int]:
    """Where the job's ranks met (torch's launcher sets it): the probe children of a sharded model meet there."""
    return os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])


class AgreedOracle(ChildOracle):
    """`probe(size)` for one rank of several: its child's reading, agreed with every other rank's.

    `request_for(size, attempt)` gives the rank's request for the attempt numbered `attempt` (from 1), so a
    sharded model's children can meet under a prefix of their own for each attempt."""

    def __init__(self, request_for_attempt: Callable[[int, int], Any], *args: Any, ranks: Ranks,
                 flags: AttemptFlags) -> None:
        super().__init__(lambda size: request_for_attempt(size, len(self.attempts) + 1), *args)
        self.request_for_attempt, self.ranks, self.flags = request_for_attempt, ranks, flags

    def __call__(self, size: int) -> Reading:
        number = len(self.attempts) + 1
        key = f"{self.label}/{number}"
        child = self.call_child(size, self.request_for_attempt(size, number),
                                should_stop=lambda: self.flags.raised(key))
        if child.outcome != "ok":
            self.flags.raise_flag(key)
        if child.outcome == "oom":
            self.last_oom_log = child.traceback
        everyone: list[RankAttempt] = self.ranks.gather(_what_happened(child))
        return self._agreed(size, everyone)

    def _agreed(self, size: int, everyone: list[RankAttempt]) -> Reading:
        if any(outcome == "oom" for outcome, _, _ in everyone):
            return Reading(fits=False)
        for rank, (outcome, _, error) in enumerate(everyone):
            if outcome not in ("ok", "cancelled"):
                raise ProbeFailed(f"{self.label}: probe of size {size} ended in {outcome} on rank {rank}: {error}",
                                  self.attempts)
        if any(outcome == "cancelled" for outcome, _, _ in everyone):
            raise ProbeFailed(f"{self.label}: probe of size {size} was stopped on a rank with no cause reported",
                              self.attempts)
        return combined([reading for _, reading, _ in everyone if reading is not None])


def _what_happened(child: ChildReport) -> RankAttempt:
    reading = reading_of(child.value) if child.outcome == "ok" else None
    return child.outcome, reading, first_line(child.error) if child.error else None


def _largest(values: list[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def combined(readings: list[Reading]) -> Reading:
    """The group's reading: the highest peak and baseline, the least capacity of any rank."""
    capacities = [reading.capacity_bytes for reading in readings if reading.capacity_bytes is not None]
    return Reading(fits=True, peak_bytes=_largest([reading.peak_bytes for reading in readings]),
                   reserved_bytes=_largest([reading.reserved_bytes for reading in readings]),
                   capacity_bytes=min(capacities) if capacities else None,
                   baseline_bytes=_largest([reading.baseline_bytes for reading in readings]))
