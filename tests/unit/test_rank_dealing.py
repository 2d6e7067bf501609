"""Each step's work dealt across ranks: every rank's real tokens in a step within one sequence's length of every
other's, padded rows at one width (the same computed tokens), packs of nearly equal fill in one step, and every
sequence measured once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.parallel.dealing import deal_rows, dealt_share
from padbench.worker.engine.strategies.collate import packed_batch

MAX_LENGTH = 128


def sequences(count: int, seed: int) -> list[list[int]]:
    lengths = np.random.default_rng(seed).integers(1, MAX_LENGTH + 1, size=count)
    return [[1 + (index + position) % 97 for position in range(int(length))] for index, length in enumerate(lengths)]


def whole_batches(layout: str, data: list[list[int]], batch_size: int, world: int) -> list[Batch]:
    plugin = STRATEGIES.get(layout)
    spec = StrategySpec(name=layout, n_bins=4 if layout == "binned" else None)
    rows = batch_size * (world if plugin.layout is PaddedBatch else 1)
    return list(plugin.batches(data, spec, rows, MAX_LENGTH, 0, 3))


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize("layout", ["static", "dynamic", "binned", "packed"])
def test_every_rank_gets_the_same_tokens_per_step_within_one_sequence(layout: str, world: int) -> None:
    data = sequences(203, seed=world)
    whole = whole_batches(layout, data, 4, world)
    shares = [dealt_share(whole, rank, world) for rank in range(world)]
    steps = {len(batches) for batches, _ in shares}
    assert len(steps) == 1 and steps.pop() > 0  # the ranks step together
    longest = max(len(sequence) for sequence in data)
    for step in zip(*(batches for batches, _ in shares), strict=True):
        real = [batch.real_tokens for batch in step]
        assert max(real) - min(real) <= longest, (layout, real)
        if isinstance(step[0], PaddedBatch):  # one width: every rank computes on as many tokens, give or take a row
            assert len({batch.width for batch in step}) == 1
            assert max(batch.rows for batch in step) - min(batch.rows for batch in step) <= 1
    measured = [i for batches, _ in shares for batch in batches for i in batch.sequence_ids]
    left_out = [i for batch in whole for i in batch.sequence_ids if i not in set(measured)]
    assert len(measured) == len(set(measured))  # no sequence twice
    assert sorted(measured + left_out) == sorted(i for batch in whole for i in batch.sequence_ids)
    if isinstance(whole[0], PackedBatch):
        assert sum(out for _, out in shares) == len(whole) % world


def test_a_global_batch_is_dealt_heaviest_row_to_the_lightest_rank() -> None:
    lengths = [100, 90, 80, 10, 10, 10]
    batch = PaddedBatch(
        input_ids=torch.zeros(6, 100),
        attention_mask=torch.zeros(6, 100),
        lengths=tuple(lengths),
        sequence_ids=tuple(range(6)),
    )
    dealt = deal_rows(batch, 2)
    # rounds of two, longest first: 100 → rank 0, 90 → 1; 80 → the lighter 1, 10 → 0; 10 → 0, 10 → 1
    assert dealt == [[0, 3, 4], [1, 2, 5]]
    assert [sum(lengths[row] for row in rows) for rows in dealt] == [120, 180]


def test_one_rank_takes_the_batches_as_they_are() -> None:
    whole = whole_batches("packed", sequences(40, seed=1), 2, 1)
    assert dealt_share(whole, 0, 1) == (whole, 0)


def packs_of(fills: list[list[int]], budget: int) -> list[PackedBatch]:
    data = [[7] * length for fill in fills for length in fill]
    starts = np.cumsum([0, *(len(fill) for fill in fills)])
    return [
        packed_batch(data, list(range(start, start + len(fill))), budget)
        for start, fill in zip(starts, fills, strict=False)
    ]


def test_a_step_of_unequal_packs_is_packed_again_within_one_sequence() -> None:
    # the last packs of a layout are often sparse: 81 and 20 tokens in one step would leave a rank waiting
    whole = packs_of([[64, 64, 64, 64], [64, 64, 64, 60], [60, 21], [20]], budget=256)
    ranks = [dealt_share(whole, rank, 2)[0] for rank in range(2)]
    # longest first, each to the emptier pack: 256 and 252 tokens, then 60 and 21 + 20
    assert [[batch.real_tokens for batch in step] for step in zip(*ranks, strict=True)] == [[256, 252], [60, 41]]
    ids = sorted(i for batches in ranks for batch in batches for i in batch.sequence_ids)
    assert ids == list(range(11))  # every sequence once, by its own id


def test_packs_that_would_overflow_when_packed_again_stay_as_the_layout_made_them() -> None:
    # longest first to the emptier pack: 100, 100, 86 → A (186), 85 → B (185), 85 → B (270 > 256)
    whole = packs_of([[100, 100, 56], [86, 85, 85]], budget=256)
    step = [dealt_share(whole, rank, 2)[0][0] for rank in range(2)]
    assert [batch.sequence_ids for batch in step] == [(0, 1, 2), (3, 4, 5)]
