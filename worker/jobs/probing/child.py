"""Child-side helpers of the OOM probe, for any job kind's probe target.

A probe child builds its model, then takes its memory frame (`start_budget`): on CUDA, live tensors against
what the allocator holds plus the device's free memory; on the CPU, the address space capped at baseline +
budget (RLIMIT_AS), so an over-budget size fails its allocation exactly as a GPU runs out. After the worst
steps of one size, `peak` reads the highest memory in that frame. `read_device_facts` is a child target of
its own: the GPU read before any CUDA context of this job exists.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass

import torch

from padbench.worker.jobs.probing.protocol import DeviceFacts
from padbench.worker.runtime import procfs
from padbench.worker.runtime.environment import nvidia_driver_version
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.memory import nvml_device_index, nvml_session

# glibc mallopt parameters (malloc.h): fixed thresholds also switch off the adaptive mmap threshold.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 64 * 1024


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class MemoryFrame:
    """How raw readings map into the frame of `ProbeMeasurement`: reading − origin."""

    origin: int
    baseline: int
    capacity: int


def start_budget(device: torch.device, cpu_budget: int | None) -> MemoryFrame:
    """Take the baseline once the model is built; on CPU, cap the address space at baseline + budget.

    On CUDA the frame is live tensors (allocated bytes): what torch could still allocate is the device's
    free memory plus everything the allocator holds, cached blocks included — before it reports running
    out it frees its cache and retries. The reserved peak is reported too: it includes the fragmentation
    that allocated bytes miss, and the search weighs the two (`probing/search.py`).
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        free, _total = torch.cuda.mem_get_info(device)
        return MemoryFrame(origin=0, baseline=torch.cuda.memory_allocated(device),
                            capacity=torch.cuda.memory_reserved(device) + free)
    if cpu_budget is None:
        raise ValueError("probe.cpu_memory_budget_bytes is required to probe on the CPU")
    return_freed_memory_at_once()
    address_space = procfs.cap_address_space(cpu_budget)
    return MemoryFrame(origin=address_space, baseline=0, capacity=cpu_budget)


def return_freed_memory_at_once() -> None:
    """Make the address space follow live allocations: glibc's heap otherwise keeps freed blocks, and
    its adaptive mmap threshold changes with what was freed before, so peaks would depend on history."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, _MMAP_THRESHOLD_BYTES)


def peak(device: torch.device, frame: MemoryFrame) -> tuple[int, int | None]:
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device), torch.cuda.max_memory_allocated(device)
    # VmPeak is the address space's high-water mark; the import and model build peak no higher than
    # the baseline they leave behind, so above the origin it is the probe's own peak.
    return max(0, procfs.status_bytes("VmPeak") - frame.origin), None


def read_device_facts(ctx: ChildContext) -> DeviceFacts:
    """The GPU jobs run on (cuda:0): name, memory, driver, and what other processes hold.

    NVML is read before this child creates a CUDA context, so "others" is exactly the rest of the box;
    without NVML the CUDA runtime's figure also counts this child's own context (the source says so).
    """
    device_index = 0
    nvml = _nvml_facts(nvml_device_index(torch.device("cuda", device_index)))
    if nvml is not None:
        return nvml
    free, total = torch.cuda.mem_get_info(device_index)
    return DeviceFacts(device="cuda", name=torch.cuda.get_device_name(device_index), total_bytes=int(total),
                       driver=nvidia_driver_version(), used_by_others_bytes=int(total - free),
                       used_by_others_source="cuda-mem-get-info")


def _nvml_facts(device_index: int) -> DeviceFacts | None:
    with nvml_session() as nvml:
        if nvml is None:  # no NVML here: the caller falls back to the CUDA runtime
            return None
        handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        name = nvml.nvmlDeviceGetName(handle)
        return DeviceFacts(device="cuda", name=name.decode() if isinstance(name, bytes) else str(name),
                           total_bytes=int(memory.total), driver=nvidia_driver_version(),
                           used_by_others_bytes=int(memory.used), used_by_others_source="nvml")
