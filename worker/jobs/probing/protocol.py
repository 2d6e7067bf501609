"""What a probe child reports back, for any job kind.

Kept free of torch: a child's arguments and results are unpickled where the device must not be touched
yet (before `run_in_child` applies the environment, PYTORCH_CUDA_ALLOC_CONF included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ProbeMeasurement:
    """A size that fitted. All byte counts are in one frame, so they compare with each other.

    On CUDA the frame is live tensors: `baseline_bytes` is what the built model allocated, `capacity_bytes`
    what torch could allocate then (the allocator's reserve, cached blocks included, plus the device's free
    memory), and `peak_allocated_bytes` the peak the search fits; `peak_bytes` is the reserved peak, for
    the report only. On CPU: growth of the address space over the baseline, against the budget.
    """

    peak_bytes: int  # CUDA: the allocator's reserved peak; CPU: the address space's peak (the fitted one)
    peak_allocated_bytes: int | None  # CUDA: the allocator's peak of live tensors (the fitted one); None on CPU
    capacity_bytes: int
    baseline_bytes: int
    kernel: str
    seconds: float


@dataclass(frozen=True)
class DeviceFacts:
    """The device as found before probing: the probe cache's key, and the memory others held."""

    device: Literal["cuda", "cpu"]
    name: str
    total_bytes: int | None
    driver: str | None
    used_by_others_bytes: int | None
    used_by_others_source: str | None  # "nvml", or "cuda-mem-get-info" (includes the reader's own context)
