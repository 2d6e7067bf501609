"""One measurement out of every rank's: the job's figures are the whole group's, step by step.

Ranks step together (they agreed on the number of batches, the warm-up and where each repeat ends), so
step *s* of a repeat is one step of the group: its tokens are every rank's tokens at that step, and its time
is the slowest rank's — with FSDP the ranks wait for each other inside every step anyway, and a replicated
model is charged the same, as a loop that steps its replicas together would be. The group's tokens per
second is then Σ tokens / Σ step times, exactly as for one process.

The time spent in collectives comes from the profiler over a few steps after the measurement (never inside
it), with the part of it that no compute overlapped (`overlap`): on GPUs the NCCL kernels, whose time includes
waiting for the slowest rank, against the other kernels; on CPUs gloo's collectives against the operators of the
threads that compute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from padbench.worker.engine.measure.timing import Measurement, RepeatTiming
from padbench.worker.engine.parallel.overlap import CollectiveTime, collective_time

PROFILED_STEPS = 3  # enough to average over a layer's all-gathers and the reduce-scatters of one step


@dataclass(frozen=True)
class RankRun:
    """What one rank measured for a strategy, sent to the others once the strategy ends."""

    measurement: Measurement
    real_tokens: tuple[int, ...]  # per prepared batch
    computed_tokens: tuple[int, ...]
    flops: tuple[float | None, ...]
    peak_allocated_bytes: int | None
    collectives: CollectiveTime | None  # per step, profiled after the measurement; None on one process
    device: str
    batches_left_out: int
    matmul_flops: float | None  # this rank's GPU's GEMM rate, measured in the job; None on a CPU


@dataclass(frozen=True)
class GroupMeasurement:
    """The group's steps as if one process had run them: the inputs `summarize` takes."""

    measurement: Measurement
    real_tokens: list[int]
    computed_tokens: list[int]
    flops: list[float | None]


def _summed_flops(runs: list[RankRun], index: int) -> float | None:
    counted = [run.flops[index] for run in runs]
    return None if any(value is None for value in counted) else float(sum(v for v in counted if v is not None))


def _group_repeat(runs: list[RankRun], number: int) -> RepeatTiming:
    repeats = [run.measurement.repeats[number] for run in runs]
    indices = repeats[0].batch_indices
    if any(repeat.batch_indices != indices for repeat in repeats):
        raise RuntimeError("the ranks measured different steps: they did not step together")
    slowest = tuple(max(seconds) for seconds in zip(*(repeat.batch_seconds for repeat in repeats), strict=True))
    return RepeatTiming(indices, slowest)


def group_measurement(runs: list[RankRun]) -> GroupMeasurement:
    batches = len(runs[0].real_tokens)
    if any(len(run.real_tokens) != batches for run in runs):
        raise RuntimeError("the ranks prepared different numbers of batches: they did not agree on the steps")
    repeats = tuple(_group_repeat(runs, number) for number in range(len(runs[0].measurement.repeats)))
    first = runs[0].measurement
    warmup_seconds = max(run.measurement.warmup_seconds for run in runs)
    return GroupMeasurement(
        measurement=Measurement(first.warmup_batches, warmup_seconds, repeats),
        real_tokens=[sum(run.real_tokens[i] for run in runs) for i in range(batches)],
        computed_tokens=[sum(run.computed_tokens[i] for run in runs) for i in range(batches)],
        flops=[_summed_flops(runs, i) for i in range(batches)],
    )


def profile_collectives(step: Callable[[int], None], batches: int, device: torch.device) -> CollectiveTime:
    """Seconds per step inside collectives and those of them exposed, over `PROFILED_STEPS` steps (every rank
    runs the same ones)."""
    steps = min(PROFILED_STEPS, batches)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as trace:
        for index in range(steps):
            step(index)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return collective_time(trace.events(), device, steps)
