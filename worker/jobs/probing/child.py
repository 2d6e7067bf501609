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
import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from padbench.worker.jobs.probing.protocol import DeviceFacts
from padbench.worker.runtime import procfs
from padbench.worker.runtime.environment import nvidia_driver_version
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.memory import nvml_device_index, nvml_session

# glibc mallopt parameters (malloc.h): fixed thresholds also switch off the adaptive mmap threshold.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 64 * 1024

Kernel = TypeVar("Kernel")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class MemoryFrame:
    """How raw readings map into the frame of `ProbeMeasurement`: reading − origin."""

    origin: int
    baseline: int
    capacity: int


@dataclass
class BuiltModel(Generic[Kernel]):
    """A child's model for one set of probe settings, reused by the next size of the same settings."""

    settings: Any  # the request with its size zeroed: what the model was built for
    kernel: Kernel
    model: torch.nn.Module
    cpu_frame: MemoryFrame | None  # the CPU budget's frame, fixed once the address space is capped


class ModelKeeper(Generic[Kernel]):
    """Keeps one `BuiltModel` per child: the sizes of one setting share it, new settings replace it.

    On the CPU the address space is capped right after the build, so the frame stays fixed for the model's
    life (sizes only grow while they fit, and running out ends the child, so VmPeak is always the current
    size's own peak)."""

    def __init__(self) -> None:
        self._built: BuiltModel[Kernel] | None = None

    def get(self, settings: Any, device: torch.device, cpu_budget: int | None,
            build: Callable[[], tuple[Kernel, torch.nn.Module]]) -> BuiltModel[Kernel]:
        if self._built is not None and self._built.settings == settings:
            return self._built
        self._built = None  # the last settings' model goes before the next is built: no peak holding both
        if device.type == "cpu":
            torch.set_num_threads(1)  # no new thread stacks once the address space is capped
        kernel, model = build()
        cpu_frame = None if device.type == "cuda" else start_budget(device, cpu_budget)
        self._built = BuiltModel(settings, kernel, model, cpu_frame)
        return self._built


def size_frame(device: torch.device, built: BuiltModel[Any]) -> MemoryFrame:
    """Release what the previous size left (cycles, cached blocks), then read the frame for the next one."""
    gc.collect()
    if built.cpu_frame is not None:
        return built.cpu_frame
    torch.cuda.empty_cache()
    return start_budget(device, None)


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
