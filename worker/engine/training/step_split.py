"""Where a training step's time goes: forward (with the loss), backward, optimizer, each timed apart.

Timing the phases needs a mark between them, and on a GPU a mark is an event the host records into the
stream; the measurement itself never carries one (its steps run back to back, as a trainer's do), so the
split is timed over a few more steps once the measurement is over, on batches of the same run. On a GPU the
phases are read from CUDA events (device time between marks); on the CPU, where every operation finishes
before the next starts, from the host's performance counter.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from padbench.contract.training import StepSplit
from padbench.worker.engine.training.steps import TrainingStep

SPLIT_STEPS = 3  # steps timed phase by phase after the measurement

Mark = torch.cuda.Event | float


def _mark(device: torch.device) -> Mark:
    if device.type == "cuda":
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return time.perf_counter()


def _seconds(start: Mark, end: Mark) -> float:
    if isinstance(start, float) and isinstance(end, float):
        return end - start
    assert isinstance(start, torch.cuda.Event) and isinstance(end, torch.cuda.Event)
    return float(start.elapsed_time(end)) / 1000.0


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_step_phases(step: TrainingStep, indices: Sequence[int], device: torch.device) -> StepSplit:
    """The mean forward, backward and optimizer time per step over the steps on batches `indices`."""
    _synchronize(device)  # work still queued from before must not land in the first forward
    marks: list[tuple[Mark, Mark, Mark, Mark]] = []
    for index in indices:
        started = _mark(device)
        loss = step.forward_loss(index)
        forward_done = _mark(device)
        loss.backward()
        backward_done = _mark(device)
        step.optimizer_step()
        marks.append((started, forward_done, backward_done, _mark(device)))
    _synchronize(device)
    steps = len(marks)
    return StepSplit(forward_s=sum(_seconds(m[0], m[1]) for m in marks) / steps,
                     backward_s=sum(_seconds(m[1], m[2]) for m in marks) / steps,
                     optimizer_s=sum(_seconds(m[2], m[3]) for m in marks) / steps, steps=steps)


def mean_split(splits: Sequence[StepSplit]) -> StepSplit:
    """The ranks' splits averaged: the group's step, phase by phase (the ranks wait for each other in every
    collective, so their phases differ little)."""
    count = len(splits)
    return StepSplit(forward_s=sum(s.forward_s for s in splits) / count,
                     backward_s=sum(s.backward_s for s in splits) / count,
                     optimizer_s=sum(s.optimizer_s for s in splits) / count, steps=splits[0].steps)
