"""Block masks made from each query's key range list the same partial and full blocks as FlexAttention's own
`create_block_mask`, which evaluates the mask function on every (query, key) pair."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask

from padbench.worker.engine.decoding.range_blocks import range_block_mask

BLOCK = 16


def ranges(queries: int, keys: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed segments as a step has them: runs of queries attending growing ranges (bottom-right causal), some
    queries attending nothing, some single keys, some ranges starting or ending on a block's edge."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(0, keys, (queries,), generator=generator, dtype=torch.int32)
    length = torch.randint(0, 3 * BLOCK, (queries,), generator=generator, dtype=torch.int32)
    last = (first + length - 1).clamp(max=keys - 1)
    first[::7] = (first[::7] // BLOCK) * BLOCK  # block edges
    last[::5] = -1  # attends nothing
    start, length = queries // 3, min(2 * BLOCK, queries - queries // 3)  # one prompt's queries over one range
    first[start:start + length] = BLOCK
    last[start:start + length] = BLOCK + torch.arange(length, dtype=torch.int32)
    return first, last


def listed(counts: torch.Tensor, indices: torch.Tensor) -> list[list[int]]:
    return [sorted(row[:count].tolist()) for count, row in zip(counts[0, 0], indices[0, 0], strict=True)]


def blocks_of(mask: BlockMask) -> tuple[list[list[int]], list[list[int]]]:
    assert mask.full_kv_num_blocks is not None and mask.full_kv_indices is not None
    return (listed(mask.kv_num_blocks, mask.kv_indices),
            listed(mask.full_kv_num_blocks, mask.full_kv_indices))


@pytest.mark.parametrize(("queries", "keys"), [(96, 160), (100, 150), (37, 500), (200, 64)])
@pytest.mark.parametrize("seed", [0, 1])
def test_blocks_from_ranges_are_the_blocks_of_every_pair(queries: int, keys: int, seed: int) -> None:
    first, last = ranges(queries, keys, seed)

    def within(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return (kv_index >= first[q_index]) & (kv_index <= last[q_index])

    ours = range_block_mask(first, last, keys, BLOCK, within)
    theirs = create_block_mask(within, None, None, queries, keys, device="cpu", BLOCK_SIZE=BLOCK)
    assert blocks_of(ours) == blocks_of(theirs)
    assert ours.seq_lengths == (queries, keys)


def test_a_causal_prefill_lists_the_blocks_below_its_diagonal_as_full() -> None:
    queries = 4 * BLOCK
    first, last = torch.zeros(queries, dtype=torch.int32), torch.arange(queries, dtype=torch.int32)

    def causal(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return kv_index <= last[q_index]

    partial, full = blocks_of(range_block_mask(first, last, queries, BLOCK, causal))
    assert partial == [[0], [1], [2], [3]] and full == [[], [0], [0, 1], [0, 1, 2]]
