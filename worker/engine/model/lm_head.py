"""An LM head whose GEMM gets aligned strides: the output projection padded to a multiple of 64 rows.

With a vocabulary such as BERT's 30,522 (not a multiple of 8), the logits' row stride is misaligned for
16-byte vector loads, so cuBLAS falls back from the Hopper GEMM kernels to an sm80 CUTLASS kernel: on an
H200 the LM head of gpt2-seed took 20 ms of an 82 ms packed forward at 253 TFLOP/s. Megatron and nanoGPT
pad the vocabulary for the same reason. Here only the GEMM is padded: the padded weight is rebuilt from the
head's own weight (tied to the input embedding or not) on every call — one copy of the weight, microseconds
— and the logits are returned as a view of the real vocabulary, so every caller sees exactly the model it
asked for. Vocabularies that are already multiples of 64 (Llama 3's 128,256, Qwen 2's 151,936) keep
transformers' head untouched.
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
    # The FLOP counter counts this head like the linear layer it replaces.
    counts_as_linear = True

    def __init__(self, head: nn.Linear, tied_to: nn.Module | None) -> None:
        super().__init__()
        # A weight tied to the input embedding is read from the embedding module each call (held in a list so
        # it is not registered twice: state_dict and .to() stay as before); an untied head's parameters are
        # registered here, as they were on the linear layer. Either way the weight is looked up on a module the
        # model owns at every call, so whatever swaps a module's parameters (FSDP2 gathering its shards, cast
        # to the compute dtype) is seen here too.
        self._tied_to = [tied_to] if tied_to is not None else []
        if tied_to is None:
            self.head_weight = head.weight
        if head.bias is not None:
            self.head_bias = head.bias
        self.vocab_size = head.weight.shape[0]
        self.padding_rows = -self.vocab_size % ALIGNMENT

    @property
    def weight(self) -> torch.Tensor:
        return cast(torch.Tensor, self._tied_to[0].weight if self._tied_to else self.head_weight)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        padded_weight = F.pad(self.weight, (0, 0, 0, self.padding_rows))
        bias = getattr(self, "head_bias", None)
        padded_bias = None if bias is None else F.pad(bias, (0, self.padding_rows))
        return F.linear(hidden_states, padded_weight, padded_bias)[..., : self.vocab_size]


def align_lm_head(model: ModelT) -> ModelT:
    """Swap the model's linear LM head for the aligned one, when the vocabulary needs it."""
    head = model.get_output_embeddings()
    if not isinstance(head, nn.Linear) or head.out_features % ALIGNMENT == 0:
        return model
    embedding = model.get_input_embeddings()
    tied = head.weight is getattr(embedding, "weight", None)
    model.set_output_embeddings(AlignedLMHead(head, embedding if tied else None))
    return model
