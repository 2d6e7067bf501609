"""The KV cache and the plan of one step.

The cache holds, per layer, keys and values of `slots × capacity` tokens as one flat (rows, kv_heads,
head_dim) tensor: slot `s` owns rows `s·capacity … (s+1)·capacity − 1`. That is the varlen layout flash
kernels read in place — a slot's keys are the range [k_start, k_start + k_used) of the flat tensor — so
decoding never gathers or copies a slot's cache.

A step is a packed forward over T query tokens, grouped by slot in slot order (a slot contributes none,
one decode token, or a whole prompt). Its plan says where each token's keys are written and which range of
its slot each slot's queries attend to; causal alignment is bottom-right (the last query sees the whole
range), which is both a decode step and a prefill. A left-padded prompt is a prefill whose range starts
after its pads: the pads are computed, as a padded batch computes them, but never attended to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import PretrainedConfig


@dataclass(frozen=True)
class CacheShape:
    layers: int
    kv_heads: int
    head_dim: int

    @classmethod
    def of(cls, config: PretrainedConfig) -> CacheShape:
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or int(config.hidden_size) // heads
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        return cls(int(config.num_hidden_layers), kv_heads, int(head_dim))

    def bytes_per_token(self, dtype: torch.dtype) -> int:
        """Every layer's key and value of one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * torch.empty((), dtype=dtype).element_size()


class KvCache:
    def __init__(self, shape: CacheShape, slots: int, capacity: int, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.shape, self.slots, self.capacity = shape, slots, capacity
        rows = (slots * capacity, shape.kv_heads, shape.head_dim)
        # Zeros, not empty: masked positions are multiplied by a zero weight, and 0 · NaN of uninitialised
        # memory would still be NaN.
        self.keys = [torch.zeros(rows, device=device, dtype=dtype) for _ in range(shape.layers)]
        self.values = [torch.zeros(rows, device=device, dtype=dtype) for _ in range(shape.layers)]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


@dataclass
class HostPlan:
    """A step as the host builds it: every array is known before the step runs (no device reads)."""

    tokens: np.ndarray  # (T,) prompt token ids; -1 where the token is the slot's last generated one
    source_slot: np.ndarray  # (T,) the slot whose last generated token a -1 entry takes
    positions: np.ndarray  # (T,) position ids
    write_index: np.ndarray  # (T,) flat cache row each token's key and value go to
    query_counts: np.ndarray  # (slots,) query tokens per slot, in slot order
    k_start: np.ndarray  # (slots,) flat row where each slot's attended range starts
    k_used: np.ndarray  # (slots,) length of that range, the step's own keys included
    logit_rows: np.ndarray  # (n,) rows of T whose logits give a next token
    out_slot: np.ndarray  # (n,) the slot each next token belongs to
    out_row: np.ndarray  # (n,) the request row it is recorded under
    out_col: np.ndarray  # (n,) its column (the trash column when nobody asked for it)

    @property
    def decode_only(self) -> bool:
        return bool(len(self.tokens) == len(self.query_counts) and (self.query_counts == 1).all()
                    and (self.tokens < 0).all())


@dataclass
class StepInputs:
    """The device side of a step, handed to the attention kernels through the model call."""

    cache: KvCache
    write_index: torch.Tensor  # (T,) int64
    cu_q: torch.Tensor  # (slots + 1,) int32
    k_start: torch.Tensor  # (slots + 1,) int32, last entry unused
    k_used: torch.Tensor  # (slots,) int32
    max_q: int
    # The same ranges as host integers, for kernels that loop over slots (None inside a CUDA graph).
    host: HostPlan | None = None
    extras: dict[str, torch.Tensor] = field(default_factory=dict)
