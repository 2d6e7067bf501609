"""Choosing batches for the warm-up: the extremes of a strategy's batches."""

from __future__ import annotations

import torch

from padbench.worker.engine.data.batches import PaddedBatch, extreme_batches


def _padded(rows: int, width: int) -> PaddedBatch:
    ids = torch.ones(rows, width, dtype=torch.long)
    return PaddedBatch(ids, torch.ones_like(ids), (width,) * rows, tuple(range(rows)))


def test_extreme_batches_are_the_smallest_and_the_largest_once_each() -> None:
    batches = [_padded(4, 64), _padded(1, 100), _padded(4, 128), _padded(1, 100)]
    assert extreme_batches(batches) == [1, 2]
    assert extreme_batches([_padded(2, 8), _padded(2, 8)]) == [0] and extreme_batches([]) == []
