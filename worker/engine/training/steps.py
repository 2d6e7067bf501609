"""What one timed step does with one prepared batch: a forward pass, or a full training step.

Everything a step needs besides the batch (the labels for the loss, the optimizer) is built before
timing, so the timed region holds only device work and its launches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.distributed.fsdp import FSDPModule

from padbench.worker.engine.data.batches import Batch, PackedBatch
from padbench.worker.engine.training.chunked_loss import IGNORE_INDEX
from padbench.worker.engine.training.loss import TrainingLoss

KernelForwardFn = Callable[[torch.nn.Module, Batch], torch.Tensor]  # an attention kernel's forward: logits
StepFn = Callable[[int], None]  # issue the step for prepared batch number i

# The compiler backend for `compile: true`; a module setting so tests can trace with a cheaper one.
COMPILE_BACKEND = "inductor"


def next_token_labels(batch: Batch) -> torch.Tensor:
    """Host-side labels: each real position predicts the next token of *its own* sequence.

    The last position of every sequence, and every padding position, predicts nothing.
    """
    labels = batch.input_ids.roll(-1, dims=-1).clone()
    if isinstance(batch, PackedBatch):
        ends = torch.tensor(batch.lengths).cumsum(0) - 1
        labels[..., ends] = IGNORE_INDEX
        return labels
    next_is_real = batch.attention_mask.roll(-1, dims=-1).bool()
    next_is_real[:, -1] = False
    return labels.masked_fill(~next_is_real, IGNORE_INDEX)


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    """torch.compile with every dimension symbolic from the first call, so one graph serves all batch shapes.

    Without it a compiled model recompiles for each new (rows, width) of binned batches and each pack
    length; binned batches change shape so often that the recompiles cost far more than the compiled graph
    saves, leaving binned much slower than in eager mode. Marking only the
    token dimensions (`maybe_mark_dynamic`) is not enough: transformers' position and mask code lets dynamo
    specialise the first width it sees, and the first different width then recompiles inside the timed
    region. The runner still counts graphs during measurement and invalidates a run that recompiled.
    """
    return torch.compile(model, backend=COMPILE_BACKEND, dynamic=True)  # type: ignore[return-value]


def compiled_graph_count() -> int:
    """Graphs dynamo has compiled in this process so far (it grows on every compile and recompile)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def without_autograd(model: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
    """inference_mode, the cheapest way to run a forward, except on a model sharded by FSDP2: its forward
    re-creates views of the weight shards, and views made under inference_mode can never be updated again
    outside it, so a later training step (or a restore of the weights) would fail; no_grad keeps them normal."""
    return torch.no_grad() if isinstance(model, FSDPModule) else torch.inference_mode()


def inference_step(model: torch.nn.Module, forward: KernelForwardFn, batches: Sequence[Batch]) -> StepFn:
    def step(index: int) -> None:
        with without_autograd(model):
            forward(model, batches[index])

    return step


@dataclass(frozen=True)
class TrainingStep:
    """Forward and loss over the real next-token positions, backward, AdamW step: as one timed step, or
    phase by phase (padbench.worker.engine.training.step_split times each phase apart from the measurement)."""

    model: torch.nn.Module
    forward: KernelForwardFn
    batches: Sequence[Batch]
    labels: Sequence[torch.Tensor]
    optimizer: torch.optim.Optimizer
    loss: TrainingLoss

    def forward_loss(self, index: int) -> torch.Tensor:
        return self.loss(self.model, self.forward, self.batches[index], self.labels[index])

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def __call__(self, index: int) -> None:
        self.forward_loss(index).backward()
        self.optimizer_step()


def training_step(model: torch.nn.Module, forward: KernelForwardFn, batches: Sequence[Batch],
                  labels: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer,
                  loss: TrainingLoss) -> TrainingStep:
    return TrainingStep(model, forward, batches, labels, optimizer, loss)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW over the parameters that train: all of them, or a LoRA model's adapters (frozen weights get
    neither gradients nor optimizer state, as in PEFT's own training loops)."""
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    # On GPUs the fused AdamW kernel (the whole update in one kernel; transformers' Trainer picks it by default,
    # `adamw_torch_fused`): foreach's update took 29 ms of a 0.26 s step of a 1.7B-parameter model on an H100.
    # On the CPU, foreach (one launch per parameter group instead of one per tensor).
    if trainable and all(parameter.device.type == "cuda" for parameter in trainable):
        return torch.optim.AdamW(trainable, lr=1e-4, fused=True)
    return torch.optim.AdamW(trainable, lr=1e-4, foreach=True)
