"""What the probe's parent sends a child and what it gets back.

Kept free of torch: the arguments are unpickled in the child before `run_in_child` applies the
environment (PYTORCH_CUDA_ALLOC_CONF), so nothing here may initialise the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from padbench.contract.spec import Dtype, ModelSpec, StrategyName

# Forward passes per probe: the first grows the allocator and builds workspaces, later ones show the
# transient peaks of a warmed-up run, which is what the measurement sees.
PROBE_PASSES = 3


@dataclass(frozen=True)
class ProbeRequest:
    """One size to try, under exactly the settings the measurement will use."""

    model: ModelSpec
    dtype: Dtype
    device: Literal["cuda", "cpu"]
    strategy: StrategyName
    kernel: str  # the resolved kernel name (e.g. `torch-flash-varlen`), so the probe runs what the job runs
    size: int  # rows for padded layouts; for packed, the token budget in units of max_length
    max_length: int
    mode: Literal["inference", "training"]
    compile: bool
    seed: int
    cpu_memory_budget_bytes: int | None = None
    passes: int = PROBE_PASSES


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
