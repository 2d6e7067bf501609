"""What every strategy of a padding job shares: the spec, the device, the built model, the data and the gate's
references, and the facts the rows' figures are computed from (peak FLOP/s, the measured GEMM rate, how the
model trains)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from padbench.contract.parallel import Parallelism
from padbench.contract.training import RunPrecision
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.data.sources import TokenizedData
from padbench.worker.engine.parallel.ranks import ONE_RANK, Ranks
from padbench.worker.engine.training.features import AppliedTraining
from padbench.worker.engine.training.loss import TrainingLoss, resolve_loss

# A training step's backward costs twice its forward (gradients of activations and of weights); with adapters on
# a frozen base, once (gradients of activations only: the base weights get none, and the adapters' own FLOPs
# are a rounding error). Recomputation under activation checkpointing is not counted: MFU counts the model's
# FLOPs, not the hardware's, so that checkpointing shows as the lower MFU it costs.
TRAINING_FLOP_FACTOR = 3
ADAPTER_TRAINING_FLOP_FACTOR = 2


@dataclass(frozen=True)
class JobSetup:
    """What every strategy of a job shares."""

    spec: PaddingJobSpec
    device: torch.device
    dtype: torch.dtype
    model: torch.nn.Module
    data: TokenizedData
    sample: tuple[list[int], ...]  # the correctness gate's sequences
    references: tuple[torch.Tensor, ...]  # their one-at-a-time logits, on the host
    reference_noise: float  # how far two correct references of the sample differ (the gate's noise floor)
    peak_flops: float | None  # the device's peak FLOP/s in the job's dtype, for MFU; None when unknown
    peak_source: str | None
    matmul_flops: float | None  # the device's GEMM rate in the job's dtype, measured in this job (FLOP/s)
    initial_state: dict[str, torch.Tensor] | None  # host copy of the weights, restored between training runs
    ranks: Ranks = ONE_RANK  # this process's place among the job's ranks (one, unless the job spans GPUs)
    precision: RunPrecision = "bf16"  # what the weights are kept in: the dtype, or `amp` over fp32 weights
    parallelism: Parallelism = "single"
    applied_training: AppliedTraining | None = None  # how a training job's model trains (None: inference)
    default_experts: str | None = None  # mixtures of experts: what transformers chose to run them with

    @property
    def autocast(self) -> bool:
        """One process under `amp`: fp32 weights, each forward computing in the job's dtype (sharded models
        are cast by FSDP's own policy)."""
        return self.precision == "amp" and self.parallelism == "single"

    @property
    def loss(self) -> TrainingLoss:
        """The loss `training.loss` asks for, as it runs on this job's device."""
        return resolve_loss(self.spec.training.loss, self.device)

    @property
    def flop_factor(self) -> int:
        """Model FLOPs of a step in units of the forward's."""
        if self.spec.mode != "training":
            return 1
        adapters = self.applied_training is not None and self.applied_training.method != "full"
        return ADAPTER_TRAINING_FLOP_FACTOR if adapters else TRAINING_FLOP_FACTOR

    @property
    def loss_name(self) -> str | None:
        """What computed a training job's loss (e.g. `chunked-linear-cross-entropy`); None for inference."""
        return self.loss.name if self.spec.mode == "training" else None
