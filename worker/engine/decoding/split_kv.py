"""A decode step's attention split over each slot's attended keys, for the few hundred keys a slot holds.

One query per slot and query head attends that slot's range of its cache region. With grouped-query heads, one
thread block per (slot, key/value head) reads the range once for all the query heads sharing it. At short
contexts that leaves each block a long serial walk: FlexAttention's decoding kernel splits a region by its
*capacity*, so a slot using 260 keys of a 640-key region sits whole in the first of 2 splits, and it reads the
last 64-key block whole however few keys of it are used (on an H200, 64 slots of 100–400 keys: 22.5 µs a call,
2.6 TB/s of the card's 4.2).

Here each thread block takes `tile` keys of the slot's *used* range, from its first attended key, and loads
only keys inside the range: a slot of 260 keys is 3 blocks of ≤ 128, and blocks past a slot's range load
nothing. Each writes fp32 partials (output, running max and sum, base 2); `merge` combines them by log-sum-exp,
with gpt-oss's sinks in the denominator, in torch ops that inductor fuses into one kernel of the compiled step.
Gemma 2's soft-capping runs in the kernel. Triton runs it on CUDA only; the caller keeps FlexAttention elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

LOG2E = math.log2(math.e)
GROUP_ROWS = 16  # the query heads of one key/value head padded to the smallest tensor-core tile


@dataclass(frozen=True)
class SplitKv:
    """Keys per thread block, keys per inner step, warps, pipeline stages."""

    tile: int = 128
    block_n: int = 64
    warps: int = 4
    stages: int = 2

    def splits(self, capacity: int) -> int:
        return -(-capacity // self.tile)

    def label(self) -> str:
        return f"tile{self.tile}·n{self.block_n}·w{self.warps}·s{self.stages}"


_OP: Any = None


def _register() -> Any:
    """Registers `padbench::split_kv_partials` (Triton, through torch.library so torch.compile sees one op)."""
    global _OP
    if _OP is not None:
        return _OP
    import triton
    import triton.language as tl

    @triton.jit
    def partials_kernel(q_ptr, k_ptr, v_ptr, first_ptr, last_ptr, acc_ptr, max_ptr, sum_ptr, scale, softcap,
                        q_slot_stride, q_head_stride, kv_slot_stride, kv_key_stride, kv_head_stride, kv_heads,
                        slots, GROUP: tl.constexpr, GROUP_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
                        TILE: tl.constexpr, BLOCK_N: tl.constexpr, SOFTCAP: tl.constexpr):
        slot_head, split = tl.program_id(0), tl.program_id(1)
        # Python floats arrive as fp64 from compiled callers: the running max and sum must stay fp32.
        scale, softcap = tl.cast(scale, tl.float32), tl.cast(softcap, tl.float32)
        slot, kv_head = slot_head // kv_heads, slot_head % kv_heads
        last = tl.load(last_ptr + slot)
        start = tl.load(first_ptr + slot) + split * TILE
        stop = tl.minimum(start + TILE, last + 1)
        offs_g, offs_d = tl.arange(0, GROUP_ROWS), tl.arange(0, HEAD_DIM)
        heads = kv_head * GROUP + offs_g
        group_ok = offs_g < GROUP
        q = tl.load(q_ptr + slot * q_slot_stride + heads[:, None] * q_head_stride + offs_d[None, :],
                    mask=group_ok[:, None], other=0.0)
        top = tl.full((GROUP_ROWS,), float("-inf"), tl.float32)
        total = tl.zeros((GROUP_ROWS,), tl.float32)
        acc = tl.zeros((GROUP_ROWS, HEAD_DIM), tl.float32)
        base = slot * kv_slot_stride + kv_head * kv_head_stride
        for first_key in range(start, stop, BLOCK_N):
            keys = first_key + tl.arange(0, BLOCK_N)
            key_ok = keys < stop
            rows = base + keys[:, None] * kv_key_stride + offs_d[None, :]
            k = tl.load(k_ptr + rows, mask=key_ok[:, None], other=0.0)
            scores = tl.dot(q, tl.trans(k)) * scale
            if SOFTCAP:  # cap · tanh(s / cap), with tanh(x) = 2σ(2x) − 1
                scores = softcap * (2.0 / (1.0 + tl.exp(-2.0 * scores / softcap)) - 1.0)
            scores = tl.where(key_ok[None, :], scores * 1.4426950408889634, float("-inf"))  # base 2
            new_top = tl.maximum(top, tl.max(scores, 1))
            shrink = tl.exp2(top - new_top)
            weights = tl.exp2(scores - new_top[:, None])
            total = total * shrink + tl.sum(weights, 1)
            v = tl.load(v_ptr + rows, mask=key_ok[:, None], other=0.0)
            acc = acc * shrink[:, None] + tl.dot(weights.to(v.dtype), v)
            top = new_top
        row = (split * slots + slot) * (kv_heads * GROUP) + heads
        tl.store(acc_ptr + row[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=group_ok[:, None])
        tl.store(max_ptr + row, top, mask=group_ok)
        tl.store(sum_ptr + row, total, mask=group_ok)

    @torch.library.triton_op("padbench::split_kv_partials", mutates_args=())
    def split_kv_op(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, first: torch.Tensor,
                    last: torch.Tensor, scale: float, softcap: float, tile: int, block_n: int, warps: int,
                    stages: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        slots, capacity, kv_heads, head_dim = keys.shape
        heads = q.shape[1]
        splits = -(-capacity // tile)
        acc = torch.empty(splits, slots, heads, head_dim, device=q.device, dtype=torch.float32)
        top = torch.empty(splits, slots, heads, device=q.device, dtype=torch.float32)
        total = torch.empty_like(top)
        torch.library.wrap_triton(partials_kernel)[(slots * kv_heads, splits)](
            q, keys, values, first, last, acc, top, total, scale, softcap, q.stride(0), q.stride(1),
            keys.stride(0), keys.stride(1), keys.stride(2), kv_heads, slots, GROUP=heads // kv_heads,
            GROUP_ROWS=GROUP_ROWS, HEAD_DIM=head_dim, TILE=tile, BLOCK_N=block_n, SOFTCAP=softcap > 0,
            num_warps=warps, num_stages=stages)
        return acc, top, total

    _OP = split_kv_op
    return _OP


def fits(q: torch.Tensor, keys: torch.Tensor) -> bool:
    """Whether the kernel takes these shapes: a power-of-two head dim, at most GROUP_ROWS query heads per key
    head, a whole number of them."""
    heads, kv_heads, head_dim = q.shape[1], keys.shape[2], keys.shape[3]
    return (head_dim & (head_dim - 1)) == 0 and 16 <= head_dim <= 256 and heads % kv_heads == 0 \
        and heads // kv_heads <= GROUP_ROWS


def split_kv_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, first: torch.Tensor,
                       last: torch.Tensor, scale: float, softcap: float | None, sinks: torch.Tensor | None,
                       tiling: SplitKv) -> torch.Tensor:
    """(slots, heads, head_dim) queries, one per slot, each attending keys first[s]..last[s] of its slot's region
    of `keys`/`values` (slots, capacity, kv_heads, head_dim): (slots, heads, head_dim) in q's dtype. A slot with
    an empty range gets zeros."""
    acc, top, total = _register()(q, keys, values, first, last, scale, softcap or 0.0, tiling.tile,
                                  tiling.block_n, tiling.warps, tiling.stages)
    return merge(acc, top, total, sinks).to(q.dtype)


def merge(acc: torch.Tensor, top: torch.Tensor, total: torch.Tensor, sinks: torch.Tensor | None) -> torch.Tensor:
    """Combines (splits, slots, heads[, head_dim]) partials whose running max and sum are in base 2."""
    best = top.amax(dim=0)
    if sinks is not None:  # a sink is one more logit in every softmax's denominator, with no value
        best = torch.maximum(best, sinks.float() * LOG2E)
    best = torch.where(torch.isfinite(best), best, 0.0)  # nothing attended: every weight is 0, not NaN
    weights = torch.exp2(top - best)
    denominator = (weights * total).sum(dim=0)
    if sinks is not None:
        denominator = denominator + torch.exp2(sinks.float() * LOG2E - best)
    numerator = (weights[..., None] * acc).sum(dim=0)
    return numerator / torch.where(denominator > 0, denominator, 1.0)[..., None]
