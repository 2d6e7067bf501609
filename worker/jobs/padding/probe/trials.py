"""`batch_size: auto`: find the largest batch (for packed, token budget) a strategy can run, in children.

    report = find_batch_size(spec, strategy, kernel_name, progress)
    batch_size = report.chosen

Reads the device (and what other processes hold on it) first, answers from the probe cache when the
same device, software and model were probed before, and otherwise runs the search policy of
`probe.search` in spawned children. Only "fits" and "out of memory" steer the search; any other end
of a child (sticky CUDA error, crash, timeout, plain error) stops the probe with `ProbeFailed`, which
carries the child's log. One child serves the sizes of a strategy while they fit (between two
out-of-memory results the search only moves upward), so its model is built once; a size that runs out
of memory ends that child, and the next size starts in a fresh one. A job's strategies share their
children and the device reading (`SharedProbes`). Call it before the job's own model
is on the device: memory the calling process holds counts, to the children, as held by others.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from typing import Literal

import torch

from padbench.contract.results import ProbeAttempt, ProbeReport
from padbench.contract.spec import PaddingJobSpec, StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS
from padbench.worker.engine.model import model_config
from padbench.worker.jobs.padding.probe.cache import CachedLimit, ProbeCache, ProbeKey
from padbench.worker.jobs.padding.probe.curves import MemoryCurve
from padbench.worker.jobs.padding.probe.protocol import DeviceFacts, ProbeMeasurement, ProbeRequest
from padbench.worker.jobs.padding.probe.search import Reading, choose_size, search_ceiling, search_limit
from padbench.worker.runtime.child_session import ChildSession
from padbench.worker.runtime.environment import flash_attn_cute_version, package_version
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.runtime.messages import first_line
from padbench.worker.runtime.progress import ProgressFn

PROBE_TARGET = "padbench.worker.jobs.padding.probe.child:probe_size"
FACTS_TARGET = "padbench.worker.jobs.padding.probe.child:read_device_facts"
FACTS_TIMEOUT_S = 120.0
# Allocator settings the measurement runs with. The children must use the same: the allocator's
# configuration changes fragmentation and so the largest batch that fits, and a limit found under other
# settings would not hold for the measurement.
ALLOCATOR_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# A cached limit stays valid while other processes hold at most this much more than when it was found.
OTHERS_TOLERANCE_BYTES = 256 * 2**20
EXPECTED_PROBES = 6  # for progress only


class ProbeFailed(RuntimeError):
    """The probe could not find a size: a child ended other than fits/OOM, or even size 1 ran out."""

    def __init__(self, message: str, attempts: list[ProbeAttempt], log: str | None = None) -> None:
        super().__init__(message if log is None else f"{message}\n--- child log ---\n{log}")
        self.attempts = attempts
        self.log = log


def find_batch_size(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, progress: ProgressFn, *,
                    cache: ProbeCache | None = None, probe_target: str = PROBE_TARGET,
                    shared: SharedProbes | None = None) -> ProbeReport:
    """Probe one strategy. Pass a job's `SharedProbes` to give all its strategies one session and one reading
    of the device; without one, the probe opens its own."""
    started = time.monotonic()
    cache = cache or ProbeCache()
    with contextlib.nullcontext(shared) if shared is not None else SharedProbes(spec) as probes:
        facts = probes.device_facts(spec, progress)
        key = probe_key(spec, strategy, kernel_name, facts)
        ceiling = search_ceiling(spec.probe.cap, spec.probe.margin)
        cached = None if spec.probe.force else cache.get(key)
        if cached is not None and _still_valid(cached, ceiling, facts):
            progress(1.0, f"batch size from the probe cache: largest fit {cached.largest_fit}")
            return _report(spec, cached, facts, seconds=time.monotonic() - started, cached=True)
        oracle = ChildOracle(spec, strategy, kernel_name, facts.device, progress, probes.session, probe_target,
                             probes.starts_before_strategy)
        try:
            result = search_limit(oracle, curve=memory_curve(kernel_name), ceiling=ceiling)
        finally:
            probes.strategy_done(facts.device)
    if result.largest_fit == 0:
        raise ProbeFailed(f"{strategy.label} with {kernel_name}: even size 1 runs out of memory",
                          oracle.attempts, oracle.last_oom_log)
    limit = CachedLimit(largest_fit=result.largest_fit, smallest_oom=result.smallest_oom,
                        predicted_limit=result.predicted_limit, ceiling=ceiling,
                        used_by_others_bytes=facts.used_by_others_bytes, probes=oracle.attempts,
                        seconds=time.monotonic() - started)
    cache.put(key, limit)
    return _report(spec, limit, facts, seconds=limit.seconds, cached=False)


class SharedProbes:
    """What the `auto` strategies of one job share: a child session and one reading of the device.

    The device is read once, in the session's first child before it creates a CUDA context, so "held by
    others" is the rest of the box and not this job's own probe children. On a GPU the child that fit the last
    size of a strategy goes on to the next one: between sizes it frees everything but the CUDA context, and a
    new strategy rebuilds the model, so only the process start and imports are saved. On the CPU each strategy
    starts in a fresh child, because there the peak is the address space's high-water mark, which only a
    fresh process resets. Use as a context manager; closing stops the children (and waits for the live one,
    so its memory is free before anything is measured).
    """

    def __init__(self, spec: PaddingJobSpec) -> None:
        # On a GPU a spare child with the imports done stands by (the host has cores to spare for it), so a
        # size after an out-of-memory rarely waits for them.
        self.session = ChildSession(PROBE_TARGET, env=allocator_environment(), reuse=spec.probe.reuse_child,
                                    prestart=probe_device(spec) == "cuda")
        self.facts: DeviceFacts | None = None
        self.starts_before_strategy = 0

    def __enter__(self) -> SharedProbes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.session.close()

    def device_facts(self, spec: PaddingJobSpec, progress: ProgressFn) -> DeviceFacts:
        self.starts_before_strategy = self.session.starts
        if self.facts is None:
            started = time.monotonic()
            self.facts = read_device_facts(spec, self.session)
            if self.facts.device == "cuda":  # a child's start and imports: most of what a first probe costs
                progress(0.0, f"device read in {time.monotonic() - started:.1f} s")
        return self.facts

    def strategy_done(self, device: Literal["cuda", "cpu"]) -> None:
        if device == "cpu":
            self.session.retire()


def probe_device(spec: PaddingJobSpec) -> Literal["cuda", "cpu"]:
    return "cpu" if spec.device == "cpu" or (spec.device == "auto" and not torch.cuda.is_available()) else "cuda"


def memory_curve(kernel_name: str) -> MemoryCurve:
    return "quadratic" if ATTENTION_KERNELS.get(kernel_name).quadratic_memory else "affine"


def _report(spec: PaddingJobSpec, limit: CachedLimit, facts: DeviceFacts, *, seconds: float,
            cached: bool) -> ProbeReport:
    return ProbeReport(
        chosen=choose_size(limit.largest_fit, limit.smallest_oom, spec.probe.margin, spec.probe.cap),
        largest_fit=limit.largest_fit, smallest_oom=limit.smallest_oom, predicted_limit=limit.predicted_limit,
        margin=spec.probe.margin, cap=spec.probe.cap, probes=limit.probes, seconds=seconds, cached=cached,
        memory_total_bytes=facts.total_bytes, memory_used_by_others_bytes=facts.used_by_others_bytes,
    )


def _still_valid(cached: CachedLimit, ceiling: int, facts: DeviceFacts) -> bool:
    if cached.smallest_oom is None and cached.ceiling < ceiling:
        return False  # the old search stopped at a lower ceiling: the limit above it is unknown
    if facts.used_by_others_bytes is None or cached.used_by_others_bytes is None:
        return True
    return facts.used_by_others_bytes <= cached.used_by_others_bytes + OTHERS_TOLERANCE_BYTES


class ChildOracle:
    """The search's `probe(size)`: each size a call in the session's child, every attempt logged for the report."""

    def __init__(self, spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, device: Literal["cuda", "cpu"],
                 progress: ProgressFn, session: ChildSession, target: str = PROBE_TARGET,
                 starts_before: int | None = None) -> None:
        self.spec, self.strategy, self.kernel_name, self.device = spec, strategy, kernel_name, device
        self.progress, self.session, self.target = progress, session, target
        # Children started since the strategy began: the one that read the device serves the first probe.
        self.starts_seen = session.starts if starts_before is None else starts_before
        self.attempts: list[ProbeAttempt] = []
        self.last_oom_log: str | None = None

    def __call__(self, size: int) -> Reading:
        number = len(self.attempts) + 1
        self.progress(min(0.95, (number - 1) / EXPECTED_PROBES), f"probe {number}: trying size {size}")
        child = self.session.call(self._request(size), target=self.target, timeout_s=self.spec.probe.probe_timeout_s)
        attempt = _attempt(size, child).model_copy(update={"new_process": self.session.starts > self.starts_seen})
        self.starts_seen = self.session.starts
        self.attempts.append(attempt)
        self.progress(min(0.95, number / EXPECTED_PROBES), f"probe {number}: size {size} {describe(attempt)}")
        if child.outcome == "oom":
            self.last_oom_log = child.traceback
            return Reading(fits=False)
        if child.outcome != "ok":
            raise ProbeFailed(f"{self.strategy.label} with {self.kernel_name}: probe of size {size} ended in "
                              f"{child.outcome}: {child.error}", self.attempts, child.traceback)
        measured: ProbeMeasurement = child.value
        on_cuda = measured.peak_allocated_bytes is not None  # then peak_bytes is the allocator's reserved peak
        return Reading(fits=True, peak_bytes=fitted_peak(measured), capacity_bytes=measured.capacity_bytes,
                       baseline_bytes=measured.baseline_bytes, reserved_bytes=measured.peak_bytes if on_cuda else None)

    def _request(self, size: int) -> ProbeRequest:
        return probe_request(self.spec, self.strategy, self.kernel_name, self.device, size)


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


def probe_request(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, device: Literal["cuda", "cpu"],
                  size: int) -> ProbeRequest:
    """One size under exactly the job's settings: model, dtype, kernel, max_length, mode, compile, seed."""
    return ProbeRequest(model=spec.model, dtype=spec.dtype, device=device, strategy=strategy.name,
                        kernel=kernel_name, size=size, max_length=spec.data.max_length, mode=spec.mode,
                        compile=spec.compile, seed=spec.data.seed,
                        cpu_memory_budget_bytes=spec.probe.cpu_memory_budget_bytes)


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


def read_device_facts(spec: PaddingJobSpec, session: ChildSession) -> DeviceFacts:
    """The device the job runs on. GPU facts are read in the session's child, which then serves the first
    probe (so the reading costs no process start), and this process never needs a CUDA context."""
    if probe_device(spec) == "cpu":
        if spec.probe.cpu_memory_budget_bytes is None:
            raise ProbeFailed("batch_size: auto on the CPU needs probe.cpu_memory_budget_bytes", [])
        return DeviceFacts(device="cpu", name=platform.processor() or platform.machine() or "cpu",
                           total_bytes=spec.probe.cpu_memory_budget_bytes, driver=None,
                           used_by_others_bytes=None, used_by_others_source=None)
    child = session.call(target=FACTS_TARGET, timeout_s=FACTS_TIMEOUT_S)
    if child.outcome != "ok":
        raise ProbeFailed(f"could not read the GPU before probing: {child.outcome}: {child.error}", [],
                          child.traceback)
    return child.value


def probe_key(spec: PaddingJobSpec, strategy: StrategySpec, kernel_name: str, facts: DeviceFacts) -> ProbeKey:
    family = ATTENTION_KERNELS.get(kernel_name).family
    library = {"flash-attn": package_version("flash_attn"), "flash-attn-cute": flash_attn_cute_version()}
    return ProbeKey(device_name=facts.name, total_memory_bytes=facts.total_bytes, driver=facts.driver,
                    torch=torch.__version__, transformers=package_version("transformers"),
                    kernel_library=library.get(family), model_config=model_config(spec.model).to_json_string(),
                    dtype=spec.dtype, strategy=strategy.label, kernel=kernel_name,
                    max_length=spec.data.max_length, mode=spec.mode, compile=spec.compile)
