"""FLOPs counted per batch, the numerator of MFU (the device peak is `runtime.peaks`).

Counting rules (2 FLOPs per multiply-accumulate):
- matmuls, per computed token: QKV projection 3·E², output projection E², MLP 2·E·I, LM head E·V — so
  padding costs what the GPU really spends on it;
- attention, per layer and sequence of computed length L: QKᵀ and AV are 2·L²·E MACs together,
  counted as half for causal attention (the ideal a causal kernel skips to); a padded row's computed length
  is its full width, a packed sequence's its own length.
For gpt2-seed (E 1024, I 4096, 12 layers, V 30,522) the matmuls are 12 · 12·1024² + 1024 · 30,522 =
182,249,472 MACs, ~365 MFLOP per token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from transformers import GPT2Config

from padbench.worker.engine.batches import Batch, PackedBatch


@dataclass(frozen=True)
class ModelShape:
    n_layer: int
    n_embd: int
    n_inner: int
    vocab_size: int

    @classmethod
    def of(cls, config: GPT2Config) -> ModelShape:
        inner = config.n_inner if config.n_inner is not None else 4 * config.n_embd
        return cls(n_layer=config.n_layer, n_embd=config.n_embd, n_inner=inner, vocab_size=config.vocab_size)

    @property
    def matmul_flops_per_token(self) -> int:
        width = self.n_embd
        per_layer = 3 * width * width + width * width + 2 * width * self.n_inner
        return 2 * (self.n_layer * per_layer + width * self.vocab_size)

    def attention_flops(self, lengths: Iterable[int], causal: bool = True) -> int:
        """Score and value matmuls of every layer over sequences of these computed lengths."""
        full = sum(2 * 2 * length * length * self.n_embd for length in lengths) * self.n_layer
        return full // 2 if causal else full


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
