"""The parent side of the OOM probe, for any job kind: one size per call in a child, read for the search.

`ChildOracle` is the search's `probe(size) -> Reading`: it sends the kind's request for a size to the
session's child and turns how the child ended into a reading. Only "fits" and "out of memory" steer the
search; any other end (sticky CUDA error, crash, timeout, plain error) stops the probe with `ProbeFailed`,
which carries the child's log. Every attempt is kept for the `ProbeReport`.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any, Literal

import torch

from padbench.contract.results import ProbeAttempt
from padbench.contract.spec import Device, ProbeSpec
from padbench.worker.jobs.probing.protocol import DeviceFacts, ProbeMeasurement
from padbench.worker.jobs.probing.search import Reading
from padbench.worker.runtime.child_session import ChildSession
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.runtime.messages import first_line
from padbench.worker.runtime.progress import ProgressFn

FACTS_TARGET = "padbench.worker.jobs.probing.child:read_device_facts"
FACTS_TIMEOUT_S = 120.0
# Allocator settings the measurement runs with. The children must use the same: the allocator's
# configuration changes fragmentation and so the largest batch that fits, and a limit found under other
# settings would not hold for the measurement.
ALLOCATOR_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
EXPECTED_PROBES = 6  # for progress only


class ProbeFailed(RuntimeError):
    """The probe could not find a size: a child ended other than fits/OOM, or even size 1 ran out."""

    def __init__(self, message: str, attempts: list[ProbeAttempt], log: str | None = None) -> None:
        super().__init__(message if log is None else f"{message}\n--- child log ---\n{log}")
        self.reason = message  # without the log: for a result's one-line error
        self.attempts = attempts
        self.log = log


class ChildOracle:
    """The search's `probe(size)`: each size a call in the session's child, every attempt logged for the report.

    `request_for(size)` is the job kind's request; `label` names what is probed in a failure's message.
    """

    def __init__(self, request_for: Callable[[int], Any], label: str, progress: ProgressFn, session: ChildSession,
                 target: str, timeout_s: float, starts_before: int | None = None) -> None:
        self.request_for, self.label, self.progress = request_for, label, progress
        self.session, self.target, self.timeout_s = session, target, timeout_s
        # Children started since the probe began: the one that read the device serves the first size.
        self.starts_seen = session.starts if starts_before is None else starts_before
        self.attempts: list[ProbeAttempt] = []
        self.last_oom_log: str | None = None

    def __call__(self, size: int) -> Reading:
        child = self.call_child(size, self.request_for(size))
        if child.outcome == "oom":
            self.last_oom_log = child.traceback
            return Reading(fits=False)
        if child.outcome != "ok":
            raise ProbeFailed(f"{self.label}: probe of size {size} ended in {child.outcome}: {child.error}",
                              self.attempts, child.traceback)
        return reading_of(child.value)

    def call_child(self, size: int, request: Any, should_stop: Callable[[], bool] | None = None) -> ChildReport:
        """Try one size in the session's child, the attempt logged for the report and the progress bar."""
        number = len(self.attempts) + 1
        self.progress(min(0.95, (number - 1) / EXPECTED_PROBES), f"probe {number}: trying size {size}")
        child = self.session.call(request, target=self.target, timeout_s=self.timeout_s, should_stop=should_stop)
        attempt = _attempt(size, child).model_copy(update={"new_process": self.session.starts > self.starts_seen})
        self.starts_seen = self.session.starts
        self.attempts.append(attempt)
        self.progress(min(0.95, number / EXPECTED_PROBES), f"probe {number}: size {size} {describe(attempt)}")
        return child


def reading_of(measured: ProbeMeasurement) -> Reading:
    on_cuda = measured.peak_allocated_bytes is not None  # then peak_bytes is the allocator's reserved peak
    return Reading(fits=True, peak_bytes=fitted_peak(measured), capacity_bytes=measured.capacity_bytes,
                   baseline_bytes=measured.baseline_bytes, reserved_bytes=measured.peak_bytes if on_cuda else None)


def describe(attempt: ProbeAttempt) -> str:
    """One probe's outcome for the progress log: what it held, or how it ended (the error's first line)."""
    seconds = f"({attempt.seconds:.1f} s)"
    if attempt.outcome != "fits":
        said = first_line(attempt.error)
        return f"{attempt.outcome.replace('_', ' ')} {seconds}" + (f": {said}" if said else "")
    held = [f"{label} {value / 2**30:.2f} GiB" for label, value in
            (("peak", attempt.peak_allocated_bytes), ("reserved", attempt.peak_reserved_bytes)) if value is not None]
    return f"fits {seconds}" + (f": {', '.join(held)}" if held else "")


def fitted_peak(measured: ProbeMeasurement) -> int:
    """The peak in the frame of the capacity: allocated bytes on CUDA, the address space's growth on CPU."""
    return measured.peak_allocated_bytes if measured.peak_allocated_bytes is not None else measured.peak_bytes


def _attempt(size: int, child: ChildReport) -> ProbeAttempt:
    if child.outcome == "ok":
        measured: ProbeMeasurement = child.value
        on_cuda = measured.peak_allocated_bytes is not None
        return ProbeAttempt(size=size, outcome="fits", seconds=child.seconds,
                            peak_allocated_bytes=measured.peak_allocated_bytes if on_cuda else measured.peak_bytes,
                            peak_reserved_bytes=measured.peak_bytes if on_cuda else None)
    outcome = "error" if child.outcome == "cancelled" else child.outcome
    return ProbeAttempt(size=size, outcome=outcome, seconds=child.seconds, error=child.error)


def allocator_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in ALLOCATOR_VARIABLES if name in os.environ}


def probe_device(device: Device) -> Literal["cuda", "cpu"]:
    return "cpu" if device == "cpu" or (device == "auto" and not torch.cuda.is_available()) else "cuda"


def read_device_facts(device: Device, probe: ProbeSpec, session: ChildSession,
                      facts_target: str = FACTS_TARGET) -> DeviceFacts:
    """The device the job runs on. GPU facts are read in the session's child, which then serves the first
    probe (so the reading costs no process start), and this process never needs a CUDA context."""
    if probe_device(device) == "cpu":
        if probe.cpu_memory_budget_bytes is None:
            raise ProbeFailed("batch_size: auto on the CPU needs probe.cpu_memory_budget_bytes", [])
        return DeviceFacts(device="cpu", name=platform.processor() or platform.machine() or "cpu",
                           total_bytes=probe.cpu_memory_budget_bytes, driver=None,
                           used_by_others_bytes=None, used_by_others_source=None)
    child = session.call(target=facts_target, timeout_s=FACTS_TIMEOUT_S)
    if child.outcome != "ok":
        raise ProbeFailed(f"could not read the GPU before probing: {child.outcome}: {child.error}", [],
                          child.traceback)
    return child.value
