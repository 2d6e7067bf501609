"""The training loss's correctness gate: a fused loss must compute what the full logits compute.

Before anything is timed, one sample batch goes through the model twice without autograd: once as usual
(its logits and their cross-entropy: the loss the model defines, whatever it does to its head's output),
and once with the head passed through (padbench.worker.engine.training.loss), giving the final hidden states and the
head as the forward saw it. On those, detached, the full path (the head's logits, then `F.cross_entropy`)
and the fused loss each give a loss and its gradients w.r.t. the hidden states and the head's weight. The
fused loss passes when its loss matches the full path's, the full path's matches the model's own, and both
gradients match the full path's, each within the dtype's tolerance (relative: |Δ| / |reference|, and
‖Δ‖ / ‖reference‖ for gradients). Comparing with the model's own loss catches a model that transforms its
head's output in a way the fused loss does not reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from padbench.worker.engine.data.batches import Batch
from padbench.worker.engine.parallel.sharding import reshard
from padbench.worker.engine.training.chunked_loss import IGNORE_INDEX
from padbench.worker.engine.training.loss import ForwardFn, FusedLoss, HeadWeights, passthrough_head

# Relative tolerances (loss, gradients) by the dtype the head computes in. Half precision: the full path's
# logits are rounded to it before the fp32 softmax, the fused loss's are not (Liger, chunked); the weight's
# gradient is summed over chunks in fp32 by one and in a single GEMM by the other.
TOLERANCES = {torch.float32: (1e-4, 1e-3), torch.bfloat16: (2e-2, 5e-2), torch.float16: (1e-2, 2e-2)}


@dataclass(frozen=True)
class LossCheck:
    passed: bool
    loss_error: float  # the largest relative difference of the losses
    gradient_error: float  # the largest relative difference of the gradients
    reason: str | None = None


def _relative(value: torch.Tensor, reference: torch.Tensor) -> float:
    scale = float(reference.float().norm())
    return float((value.float() - reference.float()).norm()) / max(scale, 1e-12)


def full_path_loss(hidden: torch.Tensor, head: HeadWeights, labels: torch.Tensor) -> torch.Tensor:
    """`full`'s loss on flat hidden states: the head's logits (soft-capped as the model caps them), then
    cross-entropy."""
    logits = F.linear(hidden, head.weight, head.bias)
    if head.softcap is not None:
        logits = torch.tanh(logits / head.softcap) * head.softcap
    return F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX)


def _loss_and_gradients(loss: torch.Tensor, hidden: torch.Tensor,
                        weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    grad_hidden, grad_weight = torch.autograd.grad(loss, (hidden, weight))
    return loss.detach(), grad_hidden, grad_weight


def check_fused_loss(fused: FusedLoss, model: torch.nn.Module, forward: ForwardFn, batch: Batch,
                     labels: torch.Tensor, compute_dtype: torch.dtype) -> LossCheck:
    """Whether `fused` matches the full logits on `batch` (call it under the job's autocast, if any)."""
    flat_labels = labels.reshape(-1)
    try:
        with torch.no_grad():  # not inference_mode: the hidden states take part in autograd below
            logits = forward(model, batch)
            own_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat_labels,
                                       ignore_index=IGNORE_INDEX)
            del logits
            with passthrough_head(model) as passthrough:
                hidden = forward(model, batch)
        assert passthrough.seen is not None, "the model's forward never called its output embedding"
        seen = passthrough.seen
        hidden = hidden.reshape(-1, hidden.shape[-1]).detach().requires_grad_()
        weight = seen.weight.detach().requires_grad_()
        head = HeadWeights(weight, None if seen.bias is None else seen.bias.detach(), seen.padding_rows,
                           seen.softcap, seen.compute_dtype)
        full = _loss_and_gradients(full_path_loss(hidden, head, flat_labels), hidden, weight)
        ours = _loss_and_gradients(fused.of_hidden(hidden, head, flat_labels), hidden, weight)
    finally:
        reshard(model)  # a sharded root keeps its weights gathered after a forward without backward
    return _verdict(fused.name, own_loss, full, ours, compute_dtype)


def _verdict(name: str, own_loss: torch.Tensor, full: tuple[torch.Tensor, ...], ours: tuple[torch.Tensor, ...],
             compute_dtype: torch.dtype) -> LossCheck:
    loss_tolerance, gradient_tolerance = TOLERANCES[compute_dtype]
    loss_error = _relative(ours[0], full[0])
    model_error = _relative(full[0], own_loss)
    hidden_error, weight_error = _relative(ours[1], full[1]), _relative(ours[2], full[2])
    figures = LossCheck(True, max(loss_error, model_error), max(hidden_error, weight_error))
    problems = []
    if not (loss_error <= loss_tolerance and model_error <= loss_tolerance):
        problems.append(f"loss {float(ours[0]):.6g} vs {float(full[0]):.6g} from the head's logits and "
                        f"{float(own_loss):.6g} from the model's own (tolerance {loss_tolerance:g} relative)")
    if not (hidden_error <= gradient_tolerance and weight_error <= gradient_tolerance):
        problems.append(f"gradients off by {hidden_error:.3g} (hidden states) and {weight_error:.3g} (head weight), "
                        f"relative (tolerance {gradient_tolerance:g})")
    if not problems:
        return figures
    return LossCheck(False, figures.loss_error, figures.gradient_error, f"{name}: {'; '.join(problems)}")
