"""The largest inputs a layout can be handed at a given size, for the OOM probe.

A padded batch is worst when every row is max_length long. A pack is worst when its whole budget is
max_length segments: the longest segments for flash kernels, and, with the budget fixed, the largest
Σ lenᵢ² for a materialised block-diagonal mask. Token values do not change memory use; they are
drawn at random (fixed seed) only so embeddings see ordinary ids.
"""

from __future__ import annotations

import numpy as np
import torch

from padbench.worker.engine.data.batches import Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.strategies.collate import segment_layout


def _random_ids(shape: tuple[int, ...], vocab_size: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(0).integers(0, vocab_size, size=shape, dtype=np.int64))


def worst_case_padded(rows: int, max_length: int, vocab_size: int) -> PaddedBatch:
    return PaddedBatch(input_ids=_random_ids((rows, max_length), vocab_size),
                       attention_mask=torch.ones(rows, max_length, dtype=torch.int64),
                       lengths=(max_length,) * rows, sequence_ids=tuple(range(rows)))


def worst_case_packed(budget_tokens: int, max_length: int, vocab_size: int) -> PackedBatch:
    """max_length segments filling the budget; a budget that is not a multiple ends in one shorter segment."""
    full, remainder = divmod(budget_tokens, max_length)
    lengths = (max_length,) * full + ((remainder,) if remainder else ())
    position_ids, cu_seqlens, max_seqlen = segment_layout(lengths)
    return PackedBatch(input_ids=_random_ids((1, budget_tokens), vocab_size), position_ids=position_ids,
                       cu_seqlens=cu_seqlens, max_seqlen=max_seqlen, lengths=lengths,
                       sequence_ids=tuple(range(len(lengths))), token_budget=budget_tokens)


def worst_case_batch(layout: type[PaddedBatch] | type[PackedBatch], size: int, max_length: int,
                     vocab_size: int) -> Batch:
    """The worst batch of a strategy's `size` in its layout: `size` rows, or a pack of `size` × max_length
    tokens (a packing strategy's batch size counts max_length rows' worth of tokens)."""
    if layout is PackedBatch:
        return worst_case_packed(size * max_length, max_length, vocab_size)
    return worst_case_padded(size, max_length, vocab_size)
