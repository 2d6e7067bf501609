"""What else happens on the GPU while a strategy is timed: other processes, utilisation, clocks, throttling.

On a shared box another user's job can start in the middle of a measurement and halve its throughput, and a
GPU at its power or thermal limit lowers its clocks; both make a ranking noise. A sampler thread beside the
timing loop reads NVML every SAMPLE_INTERVAL_S and sums it up per strategy (`GpuActivity`); the job also
records the clocks when it starts and ends (`GpuClocks`). NVML comes from nvidia-ml-py (the `gpu` extra),
imported only when a GPU is measured; without it every figure is None, never a guess.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from padbench.contract.results import GpuActivity, GpuClocks, ThrottleReason
from padbench.worker.runtime.memory import nvml_device_index
from padbench.worker.runtime.polling import Poller

SAMPLE_INTERVAL_S = 0.05
# nvml.h's clocks-event (formerly throttle) reason bits that mean the GPU slowed itself down for power or
# heat. Idle, application-clock settings, sync boost and display clocks are not a slowdown of our work.
SLOWDOWN_BITS: dict[int, ThrottleReason] = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
}
# A row counts as throttled when this share of its samples saw a slowdown: a single sample at a power-cap
# edge is the normal behaviour of a fully loaded GPU, not a reason to distrust the figure.
THROTTLED_SHARE = 0.1
_NVML_CLOCK_SM, _NVML_CLOCK_MEM, _NVML_TEMPERATURE_GPU = 1, 2, 0


def load_nvml() -> ModuleType | None:
    """pynvml, initialised; None when it is not installed or NVML cannot start (no driver, no permission)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # every failure means the same here: no NVML figures
        return None
    return pynvml


def throttle_reasons(nvml: ModuleType, handle: Any) -> list[ThrottleReason]:
    reader = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    bits = int(reader(handle))
    return [reason for bit, reason in SLOWDOWN_BITS.items() if bits & bit]


def _optional(call: Any, *args: Any) -> Any:
    """One NVML reading, or None where this GPU or driver does not support it."""
    with suppress(Exception):
        return call(*args)
    return None


def read_gpu_clocks(device: torch.device) -> GpuClocks | None:
    """The GPU's clocks, temperature, power and slowdown reasons now; None on CPU or without NVML."""
    if device.type != "cuda":
        return None
    nvml = load_nvml()
    if nvml is None:
        return None
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(nvml_device_index(device))
        power_mw = _optional(nvml.nvmlDeviceGetPowerUsage, handle)
        return GpuClocks(
            sm_mhz=_optional(nvml.nvmlDeviceGetClockInfo, handle, _NVML_CLOCK_SM),
            memory_mhz=_optional(nvml.nvmlDeviceGetClockInfo, handle, _NVML_CLOCK_MEM),
            temperature_c=_optional(nvml.nvmlDeviceGetTemperature, handle, _NVML_TEMPERATURE_GPU),
            power_w=None if power_mw is None else power_mw / 1000.0,
            throttle_reasons=_optional(throttle_reasons, nvml, handle) or [])
    finally:
        nvml.nvmlShutdown()


@dataclass
class _Sample:
    others: int
    utilization: float | None
    sm_mhz: int | None
    reasons: list[ThrottleReason] = field(default_factory=list)


class GpuActivitySampler:
    """Reads NVML on a daemon thread every `interval_s` until stopped; `summary()` sums the samples up."""

    def __init__(self, nvml: ModuleType, device_index: int, *, allow_contention: bool,
                 interval_s: float = SAMPLE_INTERVAL_S, own_pid: int | None = None) -> None:
        self._nvml = nvml
        self._handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        self._allow, self._interval = allow_contention, interval_s
        self._own_pid = os.getpid() if own_pid is None else own_pid
        self._own_identified = True
        self._samples: list[_Sample] = []
        self._poller = Poller(self.sample, interval_s, "gpu-activity-sampler")

    def _other_processes(self) -> int:
        pids = {int(process.pid) for process in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)}
        if self._own_pid in pids:
            return len(pids) - 1
        # Our own pid is missing: NVML reports another PID namespace's ids (a container). The measuring
        # process holds a context on this GPU, so every process beyond one is someone else's.
        self._own_identified = False
        return max(0, len(pids) - 1)

    def sample(self) -> None:
        utilization = _optional(self._nvml.nvmlDeviceGetUtilizationRates, self._handle)
        self._samples.append(_Sample(
            others=self._other_processes(),
            utilization=None if utilization is None else float(utilization.gpu),
            sm_mhz=_optional(self._nvml.nvmlDeviceGetClockInfo, self._handle, _NVML_CLOCK_SM),
            reasons=_optional(throttle_reasons, self._nvml, self._handle) or []))

    def start(self) -> None:
        self._poller.start()

    def stop(self) -> GpuActivity:
        self._poller.stop()
        return self.summary()

    def summary(self) -> GpuActivity:
        samples = self._samples
        contended = sum(1 for sample in samples if sample.others > 0) / len(samples)
        throttled = sum(1 for sample in samples if sample.reasons) / len(samples)
        utilization = [sample.utilization for sample in samples if sample.utilization is not None]
        clocks = [sample.sm_mhz for sample in samples if sample.sm_mhz is not None]
        reasons = sorted({reason for sample in samples for reason in sample.reasons})
        return GpuActivity(
            samples=len(samples), interval_s=self._interval,
            other_processes_max=max(sample.others for sample in samples), contended_share=contended,
            own_process_identified=self._own_identified, contended=contended > 0,
            contention_allowed=self._allow,
            utilization_mean_percent=statistics.fmean(utilization) if utilization else None,
            sm_clock_min_mhz=min(clocks, default=None), sm_clock_max_mhz=max(clocks, default=None),
            throttled_share=throttled, throttle_reasons=reasons, throttled=throttled >= THROTTLED_SHARE)


@contextmanager
def sample_gpu_activity(device: torch.device, *, allow_contention: bool) -> Iterator[list[GpuActivity]]:
    """Sample the GPU over the `with` block; the summary is appended to the yielded list on exit (nothing on
    CPU or without NVML)."""
    collected: list[GpuActivity] = []
    nvml = load_nvml() if device.type == "cuda" else None
    sampler = None
    if nvml is not None:
        try:
            sampler = GpuActivitySampler(nvml, nvml_device_index(device), allow_contention=allow_contention)
            sampler.start()
        except Exception:  # NVML present but this GPU's readings fail: no activity figures, the run goes on
            sampler = None
    try:
        yield collected
    finally:
        if sampler is not None:
            collected.append(sampler.stop())
        if nvml is not None:
            nvml.nvmlShutdown()
