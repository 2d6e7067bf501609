"""A decode step's block mask from each slot's attended range: it lists each slot's touched key blocks, none for
an empty range, and attends as a dense mask of the ranges does."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention.flex_attention import flex_attention

from padbench.worker.engine.decoding.flex_decode import slot_range_mask

SLOTS, CAPACITY, BLOCK, HEADS, DIM = 6, 200, 64, 2, 16
# aligned and unaligned ends, a window's late first key, a range inside one block, an empty range, the lot
FIRST = torch.tensor([0, 0, 70, 130, 5, 0], dtype=torch.int32)
LAST = torch.tensor([127, 150, 199, 140, 3, 199], dtype=torch.int32)


def _within(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
    return (kv_index >= FIRST[batch]) & (kv_index <= LAST[batch])


def test_lists_the_blocks_each_range_touches() -> None:
    mask = slot_range_mask(FIRST, LAST, CAPACITY, BLOCK, _within)
    listed = mask.to_dense()[:, 0, 0].bool()  # (slots, key blocks)
    assert [torch.nonzero(row).flatten().tolist() for row in listed] == [[0, 1], [0, 1, 2], [1, 2, 3], [2], [],
                                                                        [0, 1, 2, 3]]


def test_attends_as_a_dense_mask_of_the_ranges() -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(SLOTS, HEADS, length, DIM, generator=generator) for length in (1, CAPACITY, CAPACITY))
    out = flex_attention(q, k, v, block_mask=slot_range_mask(FIRST, LAST, CAPACITY, BLOCK, _within))
    keys = torch.arange(CAPACITY)
    allowed = (keys >= FIRST[:, None].long()) & (keys <= LAST[:, None].long())
    scores = (q @ k.transpose(-1, -2)) / DIM ** 0.5
    dense = torch.softmax(scores.masked_fill(~allowed[:, None, None], float("-inf")), dim=-1) @ v
    attending = [0, 1, 2, 3, 5]  # the empty range has nothing to attend
    assert torch.allclose(out[attending], dense[attending], atol=1e-5)
