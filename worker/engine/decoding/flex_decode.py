"""`flex-kvcache`: FlexAttention over the KV cache, with Gemma 2's soft-capping and gpt-oss's sinks.

FlexAttention computes only the key blocks a block mask lists, and applies the cap inside its fused kernel as
a score_mod (`attention.flex`), so models that soft-cap or use sinks decode on a fused kernel rather than on
`eager-kvcache`'s materialised scores. Compiled on CUDA; on the CPU torch's unfused reference runs it, which
is what the tests compare against the one-request-at-a-time reference.

Two paths, both reading the cache in place:

- a pure decode step (one query per slot) sees the cache as (slots, capacity, kv_heads, head_dim), one batch
  entry per slot, and its block mask lists each slot's blocks from its attended range, built from the step's
  device tensors alone (no host integers: the step replays as a CUDA graph). One query per batch entry is
  the shape torch's compiled flex runs on its split-KV decoding kernel, which spreads one slot's range over
  several thread blocks rather than walking it in one;
- any other step (prefills beside decodes) attends its packed queries to the whole flat cache, each query to
  its own slot's range up to its own position (bottom-right causal), with the window where a layer has one.
  Its single queries (the slots that decode while others prefill) go through the decoding kernel instead, one
  per slot, and only the prefills' queries through the packed call. A block mask lists key blocks per block
  of 128 queries; single queries of many slots share a query block, which would then list every one of their
  slots' keys, and the packed kernel would read most of the cache once for each such block at every layer
  (steps with prefills ran ~25 ms against ~3.6 ms for a decode step on an H100, output lengths uniform in
  16–512: continuous batching no faster than static batches).

A compiled flex recompiles for a new mask function, so each cache keeps one mask function per window, reading
bounds from buffers that every step overwrites in place. The buffers are sized once, for the most tokens a step
can have (one per cache row: every token's key goes to a row of its own; more only in padded steps, whose graphs
are captured first), and never replaced: a CUDA graph captured with them keeps their addresses, and a replaced
buffer would leave it writing into freed memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask

from padbench.worker.engine.attention import flex
from padbench.worker.engine.decoding.cache import StepInputs
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.range_blocks import range_block_mask

BLOCK = 128  # FlexAttention's default block: the unit its block masks list
# The split-KV decoding kernel's settings for a decode step. Inductor's default splits each (slot, key/value
# head) range over 2 × SMs ÷ (slots × heads) thread blocks: 1 for 64 slots of 8 heads, so one block walks a
# whole range. On an H200 (scripts/bench_flex_decode.py, 64-key mask blocks), 64 slots of Qwen3-1.7B's 16/8
# heads took 28.3 µs a call by default, 30.4 with 4 splits and 22.5 with 2 splits of 64-key tiles (4 warps, 2
# stages) over 100–400 keys each; 42.4, 44.5 and 38.0 µs over 300–640; 233, 196 and 198 µs over 2k–4k keys. A
# wider sweep (1–4 splits, 32- and 64-key tiles and mask blocks, 2–8 warps, 2–3 stages) found nothing faster.
DECODE_KERNEL_OPTIONS = {"SPLIT_KV": 2, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
# The key blocks a decode step's mask lists (a multiple of BLOCK_N): a slot's last one is read whole, so a
# smaller block reads fewer keys past the slot's range. On an H200, 64 slots over ~190–700 keys each: 25.1 µs
# a layer with 128-key blocks, 23.5 µs with 64.
DECODE_BLOCK = 64


@dataclass(frozen=True)
class _Segments:
    """A step with prefills' tokens (T,): position, query segment, whether it is its slot's single query, the
    slot whose by-slot output it would take; per segment, its query count; per slot, its last query's token."""

    position: torch.Tensor
    segment: torch.Tensor
    queries: torch.Tensor
    single: torch.Tensor
    slot: torch.Tensor
    last_query: torch.Tensor


@dataclass
class _Bounds:
    """Per cache and window: each row's first and last attended key, overwritten by every step, and the mask
    function that reads them (one object for the cache's lifetime)."""

    first: torch.Tensor
    last: torch.Tensor
    mask_mod: Callable[..., Any]


def _bounds(rows: int, device: torch.device, per_batch: bool) -> _Bounds:
    """Bounds for `rows` batch entries (`per_batch`, a decode step's slots) or query positions."""
    first = torch.zeros(rows, dtype=torch.int32, device=device)
    last = torch.full((rows,), -1, dtype=torch.int32, device=device)
    if per_batch:
        def mask_mod(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
            return (kv_index >= first[batch]) & (kv_index <= last[batch])
    else:
        def mask_mod(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
            return (kv_index >= first[q_index]) & (kv_index <= last[q_index])
    return _Bounds(first, last, mask_mod)


def slot_range_mask(first: torch.Tensor, last: torch.Tensor, capacity: int, block: int,
                    mask_mod: Callable[..., Any]) -> BlockMask:
    """A decode step's block mask: batch entry b (a slot's region of `capacity` keys) attends keys first[b]..last[b]
    (none where last < first), in `block`-key blocks, all listed as partial. Built from device tensors alone: no
    host sync, so it can be captured in a CUDA graph. (Listing the blocks inside a range as full, which flex hands
    to its splits from the last one down, took 25.6 µs a layer against 22.5 on an H200, 64 slots of 100–400 keys.)"""
    blocks = -(-capacity // block)
    first_block = first // block
    count = torch.where(last >= first, torch.div(last, block, rounding_mode="floor") - first_block + 1, 0)
    indices = (first_block[:, None] + torch.arange(blocks, device=count.device, dtype=torch.int32)).clamp(
        max=blocks - 1)
    return BlockMask.from_kv_blocks(count.to(torch.int32)[:, None, None], indices.to(torch.int32)[:, None, None],
                                    BLOCK_SIZE=block, mask_mod=mask_mod, seq_lengths=(1, capacity),
                                    compute_q_blocks=False)


class FlexDecode(DecodeKernel):
    """FlexAttention over the cache in place: by slot for a pure decode step, packed beside it otherwise."""

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs, scale: float,
               softcap: float | None, window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        if step.is_decode_of_every_slot(q.shape[0]):
            return self._attend_by_slot(q, keys, values, step, scale, softcap, window, sinks)
        tokens = self._segments(step, q.shape[0])
        mask = self._packed_mask(step, window, tokens)
        packed = flex.flex_dense(q[None], keys[None], values[None], mask, scale=scale, softcap=softcap,
                                 sinks=sinks)[0]
        by_slot = self._attend_by_slot(q[tokens.last_query], keys, values, step, scale, softcap, window, sinks)
        # A single query is its slot's last: only those rows change. Rewriting them alone, rather than selecting
        # over every token, saves a pass over the step's whole output (~100 µs a layer for a prefill of 12k
        # tokens on an H200). An idle slot's row is another slot's token and gets that token's own value, so
        # rows written twice are written the same.
        rows = tokens.last_query
        return packed.index_put_((rows,), torch.where(tokens.single[rows, None, None], by_slot[tokens.slot[rows]],
                                                      packed[rows]))

    def _attend_by_slot(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs,
                        scale: float, softcap: float | None, window: int | None,
                        sinks: torch.Tensor | None) -> torch.Tensor:
        """(slots, heads, head_dim) queries, one per slot, each attending its slot's range: the decoding kernel."""
        cache = step.cache
        mask = self._decode_mask(step, window)
        out = flex.flex_dense(q[:, None], cache.regions(keys), cache.regions(values), mask, scale=scale,
                              softcap=softcap, sinks=sinks, static_shapes=True, kernel_options=DECODE_KERNEL_OPTIONS)
        return out[:, 0]

    @staticmethod
    def _segments(step: StepInputs, tokens: int) -> _Segments:
        if "flex_segments" in step.extras:
            return step.extras["flex_segments"]  # type: ignore[no-any-return]
        slots = step.cache.slots
        position = torch.arange(tokens, device=step.cu_q.device, dtype=torch.int32)
        segment = torch.searchsorted(step.cu_q[1:], position, right=True)
        queries = step.cu_q[1:] - step.cu_q[:-1]
        # A padded step's padding segment may be one query too; it attends scratch rows, not a slot's region.
        single = (queries[segment] == 1) & (segment < slots)
        last_query = (step.cu_q[1:slots + 1] - 1).clamp(min=0)  # an idle slot's is some other token, unused
        found = step.extras["flex_segments"] = _Segments(position, segment, queries, single,
                                                         segment.clamp(max=slots - 1), last_query)
        return found

    def _decode_mask(self, step: StepInputs, window: int | None) -> BlockMask:
        key = f"flex_decode:{window}"
        if key in step.extras:  # the step's first layer of this window built it
            return step.extras[key]  # type: ignore[no-any-return]
        cache = step.cache
        bounds = cache.kernel_state.get(key)
        if bounds is None:
            bounds = cache.kernel_state[key] = _bounds(cache.slots, step.k_used.device, per_batch=True)
        first, last = step.slot_ranges(window)
        bounds.first.copy_(first)
        bounds.last.copy_(last)
        mask = slot_range_mask(bounds.first, bounds.last, cache.capacity, DECODE_BLOCK, bounds.mask_mod)
        step.extras[key] = mask
        return mask

    def _packed_mask(self, step: StepInputs, window: int | None, segments: _Segments) -> BlockMask:
        key = f"flex_packed:{window}"
        if key in step.extras:
            return step.extras[key]  # type: ignore[no-any-return]
        cache, device, tokens = step.cache, step.k_used.device, segments.position.numel()
        bounds = cache.kernel_state.get(key)
        if bounds is None:  # a padded step may exceed the rows; its graphs are captured first, the largest first
            bounds = cache.kernel_state[key] = _bounds(max(cache.rows, tokens), device, per_batch=False)
        if bounds.first.numel() < tokens:
            raise ValueError(f"a step of {tokens} tokens exceeds the {bounds.first.numel()} that flex's mask bounds "
                             "were sized for (a cache row each, or the largest padded step captured first)")
        segment, queries, position = segments.segment, segments.queries, segments.position
        start = step.k_start[segment]
        # Bottom-right causal: a segment's last query sees its whole range, each earlier one a key less.
        last = start + step.k_used[segment] - queries[segment] + (position - step.cu_q[segment])
        bounds.first[:tokens].copy_(start if window is None else torch.maximum(start, last - window + 1))
        # Single queries attend nothing here (the decoding kernel attends them), so their blocks list no keys.
        bounds.last[:tokens].copy_(torch.where(segments.single, -1, last))
        mask = range_block_mask(bounds.first[:tokens], bounds.last[:tokens], cache.rows, BLOCK, bounds.mask_mod)
        step.extras[key] = mask
        return mask
