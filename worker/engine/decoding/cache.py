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

A step with prefills may be padded to a bucket's token count (`TokenBuckets`), so that it replays a CUDA graph
captured for that count: the padding is one more query segment after the slots' (the trash slot), whose keys
go to scratch rows after the slots' regions and whose outputs go to the trash, so no slot's cache or output
is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class TokenBuckets:
    """Token counts (multiples of `step` up to `limit`) that steps with prefills are padded to.

    Each count is one captured CUDA graph. A step of more tokens runs without one: its matmuls, not its
    kernel launches, set its time.
    """

    step: int = 64
    limit: int = 1024

    def __post_init__(self) -> None:
        if self.step < 1 or self.limit < self.step or self.limit % self.step:
            raise ValueError(f"token buckets need a positive step that divides the limit, not {self.step} "
                             f"and {self.limit}")

    def sizes(self) -> range:
        return range(self.step, self.limit + 1, self.step)

    def fit(self, tokens: int) -> int | None:
        """The bucket a step of `tokens` tokens is padded to; None beyond the largest."""
        size = -(-tokens // self.step) * self.step
        return size if size <= self.limit else None


class KvCache:
    def __init__(self, shape: CacheShape, slots: int, capacity: int, device: torch.device,
                 dtype: torch.dtype, scratch: int = 0) -> None:
        """`scratch` rows after the slots' regions take the keys of padding tokens (see `TokenBuckets`)."""
        self.shape, self.slots, self.capacity, self.scratch = shape, slots, capacity, scratch
        rows = (slots * capacity + scratch, shape.kv_heads, shape.head_dim)
        # Zeros, not empty: masked positions are multiplied by a zero weight, and 0 · NaN of uninitialised
        # memory would still be NaN.
        self.keys = [torch.zeros(rows, device=device, dtype=dtype) for _ in range(shape.layers)]
        self.values = [torch.zeros(rows, device=device, dtype=dtype) for _ in range(shape.layers)]
        # What a kernel keeps for this cache from step to step (FlexAttention's mask bounds), dying with it. A plain
        # dict on the cache rather than a weak mapping in the kernel: the compiled decode step reads it, and
        # torch.compile guards a weak mapping's keys by position, which shift whenever an old cache is collected
        # (torch 2.11's guard then raised StopIteration rather than recompiling).
        self.kernel_state: dict[str, Any] = {}

    @property
    def scratch_start(self) -> int:
        return self.slots * self.capacity

    @property
    def rows(self) -> int:
        return self.slots * self.capacity + self.scratch

    @property
    def longest_range(self) -> int:
        """The most keys one query segment attends to: a slot's region, or the scratch rows."""
        return max(self.capacity, self.scratch)

    def regions(self, tensor: torch.Tensor) -> torch.Tensor:
        """One layer's keys or values as (slots, capacity, kv_heads, head_dim): each slot's region, a view."""
        return tensor[:self.slots * self.capacity].view(self.slots, self.capacity, *tensor.shape[1:])

    def clear_scratch(self) -> None:
        for tensor in (*self.keys, *self.values):
            tensor[self.scratch_start:].zero_()

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
    # (slots,) query tokens per slot, in slot order; (slots + 1,) in a padded step, the padding segment last
    query_counts: np.ndarray
    k_start: np.ndarray  # (segments,) flat row where each segment's attended range starts
    k_used: np.ndarray  # (segments,) length of that range, the step's own keys included
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
    cu_q: torch.Tensor  # (segments + 1,) int32
    k_start: torch.Tensor  # (segments + 1,) int32, last entry unused
    k_used: torch.Tensor  # (segments,) int32
    max_q: int
    # The same ranges as host integers, for kernels that loop over slots (None inside a CUDA graph).
    host: HostPlan | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # what kernels derive once per step (masks)

    def is_decode_of_every_slot(self, queries: int) -> bool:
        """A pure decode step: one query for each of the cache's slots, in slot order, so the keys can be read as
        the cache's regions with no ranges between them."""
        return self.max_q == 1 and queries == self.cache.slots == self.k_used.numel()

    def slot_ranges(self, window: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(slots,) the first and last key each slot's last query attends to, as positions in the slot's own
        region: its used keys, or the last `window` of them."""
        slots = self.cache.slots
        used = self.k_used[:slots]  # a padded step's last segment is the padding's, not a slot's
        regions = torch.arange(slots, device=used.device, dtype=torch.int32) * self.cache.capacity
        # An idle slot (no query this step) gets the empty range [0, -1]: its planned start is no row of its region,
        # and a kernel reading blocks from it would read before or past the region.
        begin = torch.where(used > 0, self.k_start[:slots] - regions, 0)
        last = begin + used - 1
        return (begin if window is None else torch.maximum(begin, last - window + 1)), last
