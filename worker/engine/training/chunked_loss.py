"""Linear cross-entropy in chunks of tokens: the LM head and the loss together, without the full logits.

A 152k-vocabulary model's fp32 logits, and their gradient, dominate its training peak (a single 60 GiB
logits tensor at the batch size where it runs out of memory). Here the tokens are walked in chunks sized so
that a chunk's fp32 logits stay near `CHUNK_LOGITS_BYTES`; for each chunk its logits, its share of the loss
and — in the same pass — its gradients w.r.t. the hidden states and the head's weight (and bias) are
computed, then the chunk's logits are dropped. The backward only scales the saved gradients by the
incoming one. Neither the full logits nor their gradient ever exist. This is the pure-PyTorch stand-in for
Liger Kernel's fused linear cross-entropy (which does the same in Triton), for CPUs and GPUs without it.

The loss is the mean over the positions whose label is not `ignore_index`, as `F.cross_entropy` computes it.
A chunk's GEMMs run in the dtype they are given (bf16 on a bf16 model, as its LM head would); its softmax
and loss in fp32, and the weight's gradient is accumulated over chunks in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

IGNORE_INDEX = -100
CHUNK_LOGITS_BYTES = 256 * 2**20  # one chunk's fp32 logits; its softmax gradient takes as much again
MIN_CHUNK_TOKENS = 64  # below this the head's GEMMs get too thin to run near the device's rate


def chunk_tokens(vocab: int, chunk_bytes: int = CHUNK_LOGITS_BYTES) -> int:
    """How many tokens one chunk holds: its fp32 logits (tokens × vocab × 4 bytes) near `chunk_bytes`."""
    return max(MIN_CHUNK_TOKENS, chunk_bytes // (4 * vocab))


@dataclass(frozen=True)
class LossShape:
    """What the chunked loss needs to know besides the tensors."""

    vocab: int  # the real vocabulary: weight rows beyond it (alignment padding) are never predicted
    softcap: float | None = None  # Gemma 2's final logit soft-capping: cap · tanh(logits / cap)
    chunk: int | None = None  # tokens per chunk; None sizes it from the vocabulary
    ignore_index: int = IGNORE_INDEX


@dataclass
class _Gradients:
    hidden: torch.Tensor
    weight: torch.Tensor  # fp32 accumulator
    bias: torch.Tensor | None  # fp32 accumulator


def _chunk_pass(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
                shape: LossShape, count: torch.Tensor, grads: _Gradients, start: int, end: int) -> torch.Tensor:
    """One chunk's loss sum; its gradients (already divided by the label count) written into `grads`."""
    rows = hidden[start:end]
    targets = labels[start:end]
    logits = torch.nn.functional.linear(rows, weight, bias).float()
    capped = None
    if shape.softcap is not None:
        capped = torch.tanh(logits / shape.softcap)
        logits = capped * shape.softcap
    if logits.shape[-1] > shape.vocab:  # alignment padding: rows that exist for the GEMM only
        logits[:, shape.vocab:] = float("-inf")
    counted = targets != shape.ignore_index
    safe_targets = targets.masked_fill(~counted, 0).unsqueeze(1)
    log_norm = torch.logsumexp(logits, dim=-1)
    chunk_loss = ((log_norm - logits.gather(1, safe_targets).squeeze(1)) * counted).sum()
    # d(mean loss)/d(logits) = (softmax − one-hot) / count on counted positions, 0 elsewhere; computed in place
    # over the logits, so a chunk holds one (tokens × vocab) fp32 tensor at a time.
    grad_logits = logits.sub_(log_norm.unsqueeze(1)).exp_()
    grad_logits.scatter_add_(1, safe_targets, torch.full_like(safe_targets, -1.0, dtype=grad_logits.dtype))
    grad_logits.mul_((counted / count).unsqueeze(1))
    if capped is not None:  # through cap · tanh(x / cap): times 1 − tanh²
        grad_logits.mul_(1 - capped.square_())
    grad_logits = grad_logits.to(hidden.dtype)
    grads.hidden[start:end] = grad_logits @ weight
    if grads.weight.dtype == grad_logits.dtype:  # fp32: summed in place by the GEMM itself
        grads.weight.addmm_(grad_logits.t(), rows)
    else:  # half precision: the GEMM in the model's dtype, the sum over chunks in fp32
        grads.weight.add_(grad_logits.t() @ rows)
    if grads.bias is not None:
        grads.bias.add_(grad_logits.float().sum(0))
    return chunk_loss


class ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                labels: torch.Tensor, shape: LossShape) -> torch.Tensor:
        count = (labels != shape.ignore_index).sum().float()
        grads = _Gradients(torch.empty_like(hidden), torch.zeros(weight.shape, dtype=torch.float32,
                                                                  device=weight.device),
                           None if bias is None else torch.zeros(bias.shape, dtype=torch.float32,
                                                                 device=bias.device))
        step = shape.chunk or chunk_tokens(weight.shape[0])
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, hidden.shape[0], step):
            total += _chunk_pass(hidden, weight, bias, labels, shape, count, grads, start,
                                 min(start + step, hidden.shape[0]))
        ctx.save_for_backward(grads.hidden, grads.weight.to(weight.dtype),
                              None if grads.bias is None else grads.bias.to(bias.dtype))  # type: ignore[union-attr]
        ctx.has_bias = bias is not None
        return total / count

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        grad_hidden, grad_weight, grad_bias = ctx.saved_tensors
        scale = grad_loss.to(grad_hidden.dtype)
        return (grad_hidden * scale, grad_weight * scale.to(grad_weight.dtype),
                grad_bias * scale.to(grad_bias.dtype) if ctx.has_bias else None, None, None)


def chunked_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                                 labels: torch.Tensor, shape: LossShape) -> torch.Tensor:
    """Mean cross-entropy of `hidden` (tokens × hidden size) through the head `weight` (vocab rows × hidden
    size, possibly padded beyond `shape.vocab`) against `labels` (tokens)."""
    return ChunkedLinearCrossEntropy.apply(hidden, weight, bias, labels, shape)  # type: ignore[no-any-return]
