"""Peak memory of one strategy's run, from the sources that can actually see it.

On CUDA: the torch caching allocator's peaks (allocated and reserved, reset per strategy) and the whole
device's usage from NVML, sampled on a background thread while the strategy runs (NVML sees other
processes and the CUDA context too, which the allocator does not). On CPU torch has no allocator
statistics, so the only honest figure is the process's peak resident set, which Linux lets us reset per
strategy through /proc/self/clear_refs; where that is impossible the figure is None, never a guess.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Iterator
from types import ModuleType

import torch

from padbench.contract.results import MemoryStats
from padbench.worker.runtime import procfs
from padbench.worker.runtime.polling import Poller

NVML_SAMPLE_INTERVAL_S = 0.01  # optimum-benchmark's 10 ms: short enough to catch activation peaks


class NvmlSampler:
    """Polls NVML for the device's used memory on a daemon thread and keeps the maximum seen."""

    def __init__(self, device_index: int) -> None:
        import pynvml  # optional (the `gpu` extra); callers check `nvml_available()` first

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        self._poller = Poller(self._sample, NVML_SAMPLE_INTERVAL_S, "nvml-sampler")
        self.peak_used_bytes = 0

    def _sample(self) -> None:
        used = int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)
        self.peak_used_bytes = max(self.peak_used_bytes, used)

    def start(self) -> None:
        self._poller.start()

    def stop(self) -> int:
        self._poller.stop()
        self._nvml.nvmlShutdown()
        return self.peak_used_bytes


@contextlib.contextmanager
def nvml_session() -> Iterator[ModuleType | None]:
    """pynvml, initialised for the duration; None when NVML cannot be used here (then figures are None)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # not installed, no driver, or no permission: all mean "no NVML figure"
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def nvml_available() -> bool:
    with nvml_session() as nvml:
        return nvml is not None


def nvml_device_index(device: torch.device) -> int:
    """NVML numbers GPUs physically; torch numbers the visible ones. Map through CUDA_VISIBLE_DEVICES."""
    import os

    index = device.index if device.index is not None else torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
        if index < len(entries) and entries[index].isdigit():
            return int(entries[index])
    return index


def device_free_bytes(device: torch.device) -> tuple[int, int] | None:
    """(free, total) bytes of a GPU from NVML, without creating a CUDA context here; None without NVML."""
    with nvml_session() as nvml:
        if nvml is None:
            return None
        handle = nvml.nvmlDeviceGetHandleByIndex(nvml_device_index(torch.device("cuda", device.index or 0)))
        info = nvml.nvmlDeviceGetMemoryInfo(handle)
        return int(info.free), int(info.total)


def host_peak_rss_bytes() -> int | None:
    """VmHWM from /proc (resettable), else getrusage's lifetime maximum on Linux; None elsewhere."""
    with contextlib.suppress(procfs.ProcfsUnavailable):
        return procfs.status_bytes("VmHWM")
    if sys.platform.startswith("linux"):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return None


@contextlib.contextmanager
def track_peak_memory(device: torch.device) -> Iterator[list[MemoryStats]]:
    """Measure peaks over the `with` block; the stats are appended to the yielded list on exit."""
    collected: list[MemoryStats] = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        sampler = NvmlSampler(nvml_device_index(device)) if nvml_available() else None
        if sampler is not None:
            sampler.start()
        try:
            yield collected
        finally:
            torch.cuda.synchronize(device)
            device_used = sampler.stop() if sampler is not None else None
            collected.append(MemoryStats(
                peak_allocated_bytes=torch.cuda.max_memory_allocated(device),
                peak_reserved_bytes=torch.cuda.max_memory_reserved(device),
                device_used_bytes=device_used,
                source="torch-cuda-allocator" + ("+nvml" if device_used is not None else ""),
            ))
        return
    resettable = procfs.reset_peak_rss()
    try:
        yield collected
    finally:
        peak = host_peak_rss_bytes()
        collected.append(MemoryStats(
            host_peak_rss_bytes=peak,
            source="process-peak-rss" if resettable else "process-peak-rss-lifetime",
        ))
