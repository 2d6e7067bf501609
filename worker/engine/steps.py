"""What one timed step does with one prepared batch: a forward pass, or a full training step.

Everything a step needs besides the batch (the labels for the loss, the optimizer) is built before
timing, so the timed region holds only device work and its launches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from worker.engine.batches import Batch, PackedBatch

IGNORE_INDEX = -100  # cross_entropy's default: positions that predict nothing
ForwardFn = Callable[[torch.nn.Module, Batch], torch.Tensor]  # an attention kernel's forward: logits
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


def mark_token_dims_dynamic(batch: Batch) -> None:
    """Tell torch.compile that token (and row) counts vary, so one graph serves every batch shape.

    Without this a compiled model recompiles for each new (rows, width) of binned batches and each pack
    length, which destroyed binned throughput in the reference measurement (anchors §2). Dimensions of
    size 1 are left alone: torch specialises them regardless.
    """
    tensors = [value for value in vars(batch).values() if isinstance(value, torch.Tensor)]
    if isinstance(batch, PackedBatch):
        tensors += [value for value in batch.extras.values() if isinstance(value, torch.Tensor)]
    for tensor in tensors:
        for dim, size in enumerate(tensor.shape):
            if size > 1:
                torch._dynamo.maybe_mark_dynamic(tensor, dim)


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    # dynamic=None: dims marked above are symbolic from the first call, and any other dim that changes
    # becomes symbolic after one recompile (automatic dynamic shapes) rather than once per shape.
    return torch.compile(model, backend=COMPILE_BACKEND, dynamic=None)  # type: ignore[return-value]


def inference_step(model: torch.nn.Module, forward: ForwardFn, batches: Sequence[Batch]) -> StepFn:
    def step(index: int) -> None:
        with torch.inference_mode():
            forward(model, batches[index])

    return step


def training_step(model: torch.nn.Module, forward: ForwardFn, batches: Sequence[Batch],
                  labels: Sequence[torch.Tensor], optimizer: torch.optim.Optimizer) -> StepFn:
    """Forward, cross-entropy over the real next-token positions, backward, AdamW step."""

    def step(index: int) -> None:
        logits = forward(model, batches[index])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[index].reshape(-1),
                               ignore_index=IGNORE_INDEX)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    # foreach=True: one fused launch per parameter group instead of one per tensor, as training loops use.
    return torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
