"""How each step's work is dealt across a job's ranks, so that every rank computes about the same at every step.

Ranks meet in collectives at every step, so a step lasts as long as its heaviest rank's part: a lighter rank
waits. Dealing sequences to ranks up front (as torch's DistributedSampler does) and letting each rank batch
or pack its own share leaves the ranks' tokens unequal step by step. Here every rank builds the whole job's
batches alike (the same sequences, the same seed), and deals each step's work:

- padded layouts: the layout builds global batches of `batch_size × ranks` rows, and each global batch's rows
  are dealt longest first, round by round, the longest row of a round to the rank with the fewest tokens so
  far. Every rank gets `batch_size` rows of the global batch's width, so the ranks compute the same number of
  tokens, and their real tokens differ by at most one row's length (after each round the spread is at most the
  larger of the spread before it and the round's own longest-minus-shortest row);
- packed layouts: the layout's packs, at one rank's budget, one pack per rank per step, the packs of a step
  neighbours in fill; then the step's sequences are packed again, longest first, each into the pack with the
  fewest tokens so far, which leaves the packs within one sequence's length of each other (the fullest pack
  got its last sequence while it was the emptiest). Where that would overflow a pack's budget (the layout's
  packs were nearly full already), the layout's packs stay as they were.

A step too small for every rank to take part (fewer rows or packs than ranks) is left out, and counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from padbench.worker.engine.data.batches import Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.strategies.collate import packed_batch


def deal_rows(batch: PaddedBatch, world: int) -> list[list[int]]:
    """Each rank's rows of a global batch: as many rows each (give or take one), real tokens within one row's
    length of each other."""
    order = sorted(range(batch.rows), key=lambda row: -batch.lengths[row])
    loads = [0] * world
    dealt: list[list[int]] = [[] for _ in range(world)]
    for start in range(0, len(order), world):
        lightest_first = sorted(range(world), key=lambda rank: (loads[rank], rank))
        for rank, row in zip(lightest_first, order[start : start + world], strict=False):
            dealt[rank].append(row)
            loads[rank] += batch.lengths[row]
    return [sorted(rows) for rows in dealt]


def rows_of(batch: PaddedBatch, rows: Sequence[int]) -> PaddedBatch:
    """The batch's chosen rows, at the batch's width."""
    index = torch.as_tensor(rows, dtype=torch.int64)
    return replace(
        batch,
        input_ids=batch.input_ids[index],
        attention_mask=batch.attention_mask[index],
        lengths=tuple(batch.lengths[row] for row in rows),
        sequence_ids=tuple(batch.sequence_ids[row] for row in rows),
    )


def packs_in_steps(packs: Sequence[PackedBatch], world: int) -> tuple[list[list[PackedBatch]], int]:
    """The packs grouped `world` to a step, packs of nearly equal tokens together; steps in the order of their
    first pack in the layout's order (so the run does not sweep from full packs to empty ones). Also how many
    packs were left over."""
    by_fill = sorted(range(len(packs)), key=lambda index: (-packs[index].real_tokens, index))
    whole = len(packs) // world * world
    steps = [by_fill[start : start + world] for start in range(0, whole, world)]
    steps.sort(key=min)
    return [[packs[index] for index in step] for step in steps], len(packs) - whole


def _balanced_loads(lengths: Sequence[int], bins: int) -> list[list[int]]:
    """Item indices per bin: longest first, each to the bin with the fewest tokens so far."""
    loads = [0] * bins
    dealt: list[list[int]] = [[] for _ in range(bins)]
    for item in sorted(range(len(lengths)), key=lambda index: -lengths[index]):
        lightest = min(range(bins), key=lambda index: (loads[index], index))
        dealt[lightest].append(item)
        loads[lightest] += lengths[item]
    return dealt


def repacked(step: Sequence[PackedBatch]) -> list[PackedBatch]:
    """The step's sequences in as many packs, balanced; the packs as they were where one would overflow."""
    segments = [
        (segment, sequence_id, length)
        for pack in step
        for segment, sequence_id, length in zip(
            pack.input_ids[0].split(list(pack.lengths)), pack.sequence_ids, pack.lengths, strict=True
        )
    ]
    dealt = _balanced_loads([length for *_, length in segments], len(step))
    budget = min(pack.token_budget for pack in step)
    if any(sum(segments[item][2] for item in items) > budget for items in dealt) or not all(dealt):
        return list(step)
    ids = [segment.tolist() for segment, *_ in segments]
    return [
        replace(packed_batch(ids, items, budget), sequence_ids=tuple(segments[item][1] for item in items))
        for items in dealt
    ]


def dealt_share(global_batches: Sequence[Batch], rank: int, world: int) -> tuple[list[Batch], int]:
    """This rank's batch of every step, and how many of the job's batches it left out: padded global batches
    have their rows dealt, packs are dealt one per rank. One rank takes the batches as they are."""
    if world == 1:
        return list(global_batches), 0
    packs = [batch for batch in global_batches if isinstance(batch, PackedBatch)]
    if packs:
        steps, left_over = packs_in_steps(packs, world)
        return [repacked(step)[rank] for step in steps], int(rank < left_over)
    mine: list[Batch] = []
    left_out = 0
    for batch in global_batches:
        assert isinstance(batch, PaddedBatch)
        rows = deal_rows(batch, world)
        if all(rows):
            mine.append(rows_of(batch, rows[rank]))
        else:
            left_out += int(bool(rows[rank]))
    return mine, left_out
