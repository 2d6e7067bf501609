"""What the probe's parent sends a child and what it gets back.

Kept free of torch: the arguments are unpickled in the child before `run_in_child` applies the
environment (PYTORCH_CUDA_ALLOC_CONF), so nothing here may initialise the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from padbench.contract.parallel import DistributedSpec
from padbench.contract.spec import Dtype, ModelSpec, StrategyName
from padbench.contract.training import RunPrecision, TrainingSpec

# Forward passes per probe: the first grows the allocator and builds workspaces, later ones show the
# transient peaks of a warmed-up run, which is what the measurement sees.
PROBE_PASSES = 3


@dataclass(frozen=True)
class ProbeGroup:
    """For a model sharded over a job's ranks: the probe children of all ranks try each size together, as one
    process group of their own, met through the job's store under a prefix of their own."""

    rank: int
    world: int
    store_host: str
    store_port: int
    prefix: str  # new for every attempt: each attempt's children form a new group
    backend: Literal["nccl", "gloo"]
    timeout_s: float


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
    precision: RunPrecision = "bf16"  # training: the weights as the job keeps them (`amp`: fp32, autocast)
    group: ProbeGroup | None = None  # set when the job's model is sharded over its ranks
    # Training only: adapters, float8 layers and checkpointing change a step's memory as much as its batch does.
    training: TrainingSpec | None = None
    # Mixtures of experts: the implementation the row runs (None: the model's default); each holds different
    # intermediates (batched_mm gathers a weight matrix per routed token).
    experts: str | None = None
    # A sharded model's FSDP2 settings: keeping gathered weights from forward to backward changes the peak.
    distributed: DistributedSpec = field(default_factory=DistributedSpec)
