"""How much of a rank's communication its compute hides, from the profiler's timeline of a few steps.

A collective costs a step only where nothing else runs beside it: FSDP2 issues its all-gathers and
reduce-scatters on streams of their own (on GPUs) or on gloo's worker threads (on CPUs), so a layer computes
while the next one's weights arrive. From the profiler's events, the time in collectives is the union of the
collective intervals (time during which at least one collective runs), and the exposed part is what of it no
compute interval covers:

- on GPUs, the NCCL kernels against every other kernel and copy on the device, each with its device interval;
  a NCCL kernel also waits in its spin loop for the slowest rank, and that wait counts as collective time;
- on CPUs (gloo), the `gloo:` operations on gloo's threads against the `aten::` operations on every other thread
  (the ones computing the model; a wait for a collective is no operator and so no compute).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd import DeviceType

Interval = tuple[float, float]  # microseconds, start and end


@dataclass(frozen=True)
class CollectiveTime:
    """Seconds per step in collectives, and those of them no compute overlapped."""

    total_s: float
    exposed_s: float


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged where they overlap or touch, in order."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(intervals: Sequence[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def overlap(first: Sequence[Interval], second: Sequence[Interval]) -> float:
    """The length covered by both of two merged interval lists."""
    covered, i, j = 0.0, 0, 0
    while i < len(first) and j < len(second):
        start, end = max(first[i][0], second[j][0]), min(first[i][1], second[j][1])
        covered += max(0.0, end - start)
        if first[i][1] < second[j][1]:
            i += 1
        else:
            j += 1
    return covered


def _span(event: Any) -> Interval:
    return float(event.time_range.start), float(event.time_range.end)


def timeline(events: Sequence[Any], device: torch.device) -> tuple[list[Interval], list[Interval]]:
    """The merged collective intervals and the merged compute intervals of a profile's events."""
    if device.type == "cuda":
        kernels = [event for event in events if event.device_type == DeviceType.CUDA]
        collective = [_span(event) for event in kernels if "nccl" in event.name.lower()]
        compute = [_span(event) for event in kernels if "nccl" not in event.name.lower()]
        return union(collective), union(compute)
    gloo = [event for event in events if event.name.startswith("gloo:")]
    threads = {event.thread for event in gloo}
    compute = [_span(event) for event in events if event.name.startswith("aten::") and event.thread not in threads]
    return union(_span(event) for event in gloo), union(compute)


def collective_time(events: Sequence[Any], device: torch.device, steps: int) -> CollectiveTime:
    """Per step: the time in collectives and the part of it no compute ran beside."""
    collective, compute = timeline(events, device)
    total = length(collective)
    return CollectiveTime(total_s=total / 1e6 / steps, exposed_s=(total - overlap(collective, compute)) / 1e6 / steps)
