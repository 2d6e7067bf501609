"""An LM head whose GEMM gets aligned strides: the output embedding padded to a multiple of 64 rows.

With a vocabulary such as BERT's 30,522 (not a multiple of 8), the logits' row stride is misaligned for
16-byte vector loads, so cuBLAS falls back from the Hopper GEMM kernels to an sm80 CUTLASS kernel: on an
H200 the LM head of gpt2-seed took 20 ms of an 82 ms packed forward at 253 TFLOP/s. Megatron and nanoGPT
pad the vocabulary for the same reason. Here only the GEMM is padded: the padded weight is rebuilt from the
(tied) embedding on every call — 64 MB, microseconds — and the logits are returned as a view of the real
vocabulary, so every caller sees exactly the model it asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, cast

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

ALIGNMENT = 64

ModelT = TypeVar("ModelT", bound="PreTrainedModel")


class AlignedLMHead(nn.Module):
    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        # Held in a list so the tied embedding is not registered twice (state_dict, .to() stay as before).
        self._embedding = [embedding]
        self.vocab_size = embedding.num_embeddings
        self.padding_rows = -self.vocab_size % ALIGNMENT

    @property
    def weight(self) -> torch.Tensor:
        return self._embedding[0].weight

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        padded_weight = F.pad(self.weight, (0, 0, 0, self.padding_rows))
        return F.linear(hidden_states, padded_weight)[..., : self.vocab_size]


def align_lm_head(model: ModelT) -> ModelT:
    """Swap a GPT-2 LM head tied to its input embedding for the aligned one, when the vocabulary needs it."""
    # GPT-2's input embedding (wte) is an nn.Embedding; transformers types the getter as returning nn.Module.
    embedding = cast(nn.Embedding, model.get_input_embeddings())
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is embedding.weight and getattr(head, "bias", None) is None
    if tied and embedding.num_embeddings % ALIGNMENT:
        model.lm_head = AlignedLMHead(embedding)
    return model
