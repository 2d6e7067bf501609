"""Turning chosen sequences into the two batch layouts, with the host-side bookkeeping done once here.

Every strategy builds its batches through these functions, so padding (right, pad id from the tokenizer),
masks, position ids and `cu_seqlens` mean the same thing whichever strategy made the batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch


def check_sequences(sequences: Sequence[Sequence[int]], max_length: int) -> np.ndarray:
    """The token length of every sequence, refusing empty ones and ones longer than the layouts allow."""
    lengths = np.fromiter((len(ids) for ids in sequences), dtype=np.int64, count=len(sequences))
    if len(lengths) == 0:
        raise ValueError("no sequences to batch")
    if (bad := np.flatnonzero((lengths < 1) | (lengths > max_length))).size:
        raise ValueError(f"sequence {int(bad[0])} has {int(lengths[bad[0]])} tokens; "
                         f"every sequence needs 1 to max_length ({max_length})")
    return lengths


def shuffled_order(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).permutation(count)


def in_batches(order: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Consecutive slices of batch_size; the last one may be shorter."""
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def padded_width(longest: int, multiple: int | None) -> int:
    """A batch's width: its longest row, rounded up to `multiple` where the strategy pads to one."""
    step = multiple or 1
    return -(-longest // step) * step


def padded_batch(sequences: Sequence[Sequence[int]], chosen: Sequence[int] | np.ndarray, width: int,
                 pad_token_id: int) -> PaddedBatch:
    """Right-padded rows of the chosen sequences, each row `width` wide."""
    input_ids = np.full((len(chosen), width), pad_token_id, dtype=np.int64)
    lengths = []
    for row, index in enumerate(chosen):
        ids = sequences[index]
        input_ids[row, :len(ids)] = ids
        lengths.append(len(ids))
    attention_mask = np.arange(width)[None, :] < np.asarray(lengths)[:, None]
    return PaddedBatch(input_ids=torch.from_numpy(input_ids),
                       attention_mask=torch.from_numpy(attention_mask.astype(np.int64)),
                       lengths=tuple(lengths), sequence_ids=tuple(int(i) for i in chosen))


def segment_layout(lengths: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """position_ids (1, total) restarting at 0 per segment, cu_seqlens int32 (n+1), and the longest segment."""
    lengths_array = np.asarray(lengths, dtype=np.int64)
    boundaries = np.concatenate(([0], np.cumsum(lengths_array)))
    positions = np.arange(boundaries[-1]) - np.repeat(boundaries[:-1], lengths_array)
    return (torch.from_numpy(positions)[None, :], torch.from_numpy(boundaries.astype(np.int32)),
            int(lengths_array.max()))


def packed_batch(sequences: Sequence[Sequence[int]], chosen: Sequence[int], token_budget: int) -> PackedBatch:
    """The chosen sequences concatenated, in the given order, into one row of at most token_budget tokens."""
    lengths = [len(sequences[index]) for index in chosen]
    if sum(lengths) > token_budget:
        raise ValueError(f"a pack of {sum(lengths)} tokens exceeds its budget of {token_budget}")
    input_ids = np.fromiter((token for index in chosen for token in sequences[index]), dtype=np.int64,
                            count=sum(lengths))
    position_ids, cu_seqlens, max_seqlen = segment_layout(lengths)
    return PackedBatch(input_ids=torch.from_numpy(input_ids)[None, :], position_ids=position_ids,
                       cu_seqlens=cu_seqlens, max_seqlen=max_seqlen, lengths=tuple(lengths),
                       sequence_ids=tuple(int(i) for i in chosen), token_budget=token_budget)
