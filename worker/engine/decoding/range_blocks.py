"""FlexAttention block masks for queries that each attend one contiguous range of keys, made from the ranges.

`create_block_mask` evaluates the mask function on every (query, key) pair before it reduces them to blocks: for
a step that prefills 16 prompts of 8,192 tokens beside a cache of 16 such slots, that is 131k × 133k pairs, and
on an H100 its intermediates asked for 64–130 GiB at contexts of 8,192 and 16,384 tokens. Here each query adds
its range of key blocks to its query block's row of a difference array, so the work and memory grow with query
blocks × key blocks (1,024 × 1,040 in that step), never with pairs.

A key block is full for a query block when all `block` of its queries attend every key of it (flex then skips
the mask function there), partial when some query attends some of it, and not listed otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask


def range_block_mask(first: torch.Tensor, last: torch.Tensor, keys: int, block: int,
                     mask_mod: Callable[..., Any]) -> BlockMask:
    """`first`, `last` (queries,): each query's first and last attended key, empty where last < first; `keys`
    the key length; `mask_mod` the same ranges as a mask function, applied inside partial blocks."""
    queries = first.numel()
    query_blocks, key_blocks = -(-queries // block), -(-keys // block)
    query_block = torch.arange(queries, device=first.device) // block
    attends = last >= first
    touched = _blocks_in_range(query_block, first // block, last // block + 1, attends, query_blocks, key_blocks)
    # Whole blocks: from the first block starting at or after `first` to the last ending at or before `last`; the
    # key tail's partial block (keys not a multiple of `block`) never ends at or before the last key.
    whole_from, whole_to = -(-first // block), (last + 1) // block
    covered = _blocks_in_range(query_block, whole_from, whole_to, attends & (whole_to > whole_from), query_blocks,
                               key_blocks)
    # As `create_block_mask` pads both lengths to whole blocks, the tail query block (queries not a multiple of
    # `block`) counts its missing rows as attending nothing, so it has no full block.
    full = covered == block
    partial = (touched > 0) & ~full
    return BlockMask.from_kv_blocks(*_listed(partial), *_listed(full), BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(queries, keys), compute_q_blocks=False)


def _blocks_in_range(query_block: torch.Tensor, start: torch.Tensor, stop: torch.Tensor, valid: torch.Tensor,
                     query_blocks: int, key_blocks: int) -> torch.Tensor:
    """(query_blocks, key_blocks): how many of each query block's valid queries have each key block in their
    [start, stop) — +1 at start and −1 at stop of a difference array, summed along the keys."""
    difference = torch.zeros(query_blocks, key_blocks + 1, dtype=torch.int32, device=start.device)
    step = valid.to(torch.int32)
    difference.index_put_((query_block, start.clamp(0, key_blocks)), step, accumulate=True)
    difference.index_put_((query_block, stop.clamp(0, key_blocks)), -step, accumulate=True)
    return difference.cumsum(dim=1, dtype=torch.int32)[:, :key_blocks]


def _listed(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (query_blocks, key_blocks) selection as flex's counts and indices: each row's listed blocks first, in
    order, for one batch entry and one head shared by all."""
    counts = blocks.sum(dim=1, dtype=torch.int32)
    indices = torch.argsort(blocks.to(torch.int8), dim=1, descending=True, stable=True).to(torch.int32)
    return counts[None, None], indices[None, None]
