"""What the probe's parent sends a child and what it gets back.

Kept free of torch: the arguments are unpickled in the child before `run_in_child` applies the
environment (PYTORCH_CUDA_ALLOC_CONF), so nothing here may initialise the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from padbench.contract.spec import Dtype, ModelSpec, StrategyName
from padbench.contract.training import LossChoice

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
    loss: LossChoice = "fused"  # training's loss: the full logits or not decide much of a step's peak
    passes: int = PROBE_PASSES
