"""FLOPs counted per batch, the numerator of MFU (the device peak is `runtime.peaks`).

Counting rules (2 FLOPs per multiply-accumulate), read off the built model, so they hold for any
architecture transformers builds:
- matmuls, per computed token: every linear layer of the decoder and the LM head, one MAC per weight —
  attention projections with however many key/value heads, two- or three-matrix (gated) MLPs, tied or
  untied heads alike; embeddings are lookups and count nothing. Padding costs what the GPU really spends.
- mixtures of experts, per computed token: the router's scores (one MAC per router weight) and the matrices
  of the top-k experts the token is routed to (its active parameters, not all experts'); shared experts are
  linear layers, counted above. Padding tokens are routed like real ones, so they cost expert work too.
- attention, per layer and sequence of computed length L: QKᵀ and AV are 2·L²·(heads·head_dim) MACs
  together, counted as half for causal attention (the ideal a causal kernel skips to); a padded row's
  computed length is its full width, a packed sequence's its own length.
For gpt2-seed (E 1024, I 4096, 12 layers, V 30,522) the matmuls are 12 · 12·1024² + 1024 · 30,522 =
182,249,472 MACs, ~365 MFLOP per token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from transformers import PretrainedConfig
from transformers.pytorch_utils import Conv1D

from padbench.worker.engine.data.batches import Batch, PackedBatch
from padbench.worker.engine.model.experts import routed_macs_per_token, router_macs_per_token
from padbench.worker.engine.model.parameter_count import logical_numel


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    attention_width: int  # query heads × head dim: the width of QKᵀ and AV
    matmul_macs_per_token: int

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelShape:
        config: PretrainedConfig = model.config  # type: ignore[assignment]
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(n_layer=int(config.num_hidden_layers), attention_width=heads * int(head_dim),
                   matmul_macs_per_token=linear_macs_per_token(model))

    @property
    def matmul_flops_per_token(self) -> int:
        return 2 * self.matmul_macs_per_token

    def attention_flops(self, lengths: Iterable[int], causal: bool = True) -> int:
        """Score and value matmuls of every layer over sequences of these computed lengths."""
        full = sum(2 * 2 * length * length * self.attention_width for length in lengths) * self.n_layer
        return full // 2 if causal else full


def linear_macs_per_token(model: torch.nn.Module) -> int:
    """One multiply-accumulate per weight of every linear map a token goes through (LM head included, and for
    a mixture of experts its routers and the experts it is routed to)."""
    total = router_macs_per_token(model) + routed_macs_per_token(model)
    for module in model.modules():
        # GPT-2 writes its linear layers as Conv1D; the aligned LM head wraps the weight it multiplies by.
        if isinstance(module, torch.nn.Linear | Conv1D) or getattr(module, "counts_as_linear", False):
            weight: torch.Tensor = module.weight  # type: ignore[assignment]
            total += logical_numel(weight)  # a 4-bit base still multiplies by every weight it stands for
    return total


@dataclass(frozen=True)
class BatchFlops:
    matmul: int
    attention: int

    @property
    def total(self) -> int:
        return self.matmul + self.attention


def batch_flops(shape: ModelShape, batch: Batch) -> BatchFlops:
    """The work the device performs for this batch (pads included), for MFU on computed tokens."""
    if isinstance(batch, PackedBatch):
        computed_lengths: Iterable[int] = batch.lengths
    else:
        computed_lengths = [batch.width] * batch.rows
    return BatchFlops(matmul=shape.matmul_flops_per_token * batch.computed_tokens,
                      attention=shape.attention_flops(computed_lengths))
