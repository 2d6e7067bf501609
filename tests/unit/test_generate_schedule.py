"""The generate job's schedules as pure host plans: every requested token planned once, in its own cell, from
its own slot's cache region, at the right position; static batches decode to their longest answer, continuous
batching refills a freed slot at the next step.

A plan is checked against what the request must see: a decode producing output column c of a request with a
p-token prompt takes position p + c − 1, writes its key to the slot's row pad + p + c − 1 and attends to the
p + c rows after the slot's pads. Any slip there is a wrong token the gate would catch only on a model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pytest

from padbench.worker.engine.decoding.cache import HostPlan, TokenBuckets
from padbench.worker.jobs.generate.passes import plans
from padbench.worker.jobs.generate.schedule import (
    Request,
    Scheduler,
    StepRecord,
    sorted_order,
    static_batches,
)

PAD_ID = 0
PROMPTS = (5, 3, 9, 1, 7, 4, 6, 2, 8, 3, 5)
OUTPUTS = (4, 1, 7, 2, 9, 3, 1, 6, 2, 5, 8)
SLOTS = 3


def requests(prompts: Sequence[int] = PROMPTS, outputs: Sequence[int] = OUTPUTS) -> list[Request]:
    return [Request(row, tuple(range(100 + row * 20, 100 + row * 20 + p)), n)
            for row, (p, n) in enumerate(zip(prompts, outputs, strict=True))]


def scheduler(reqs: Sequence[Request], slots: int = SLOTS) -> Scheduler:
    capacity = max(len(r.prompt) for r in reqs) + max(r.output_length for r in reqs) + 1
    return Scheduler(slots, capacity, PAD_ID, trash_row=len(reqs), trash_col=max(r.output_length for r in reqs))


@dataclass
class Cell:
    step: int
    slot: int


class Tracker:
    """Replays a pass's plans, checking each against the request its slot serves, and records each cell."""

    def __init__(self, sched: Scheduler, reqs: Sequence[Request]) -> None:
        self.sched, self.by_row = sched, {r.row: r for r in reqs}
        self.occupant: dict[int, tuple[Request, int]] = {}  # slot → (request, pads before its prompt)
        self.cells: dict[tuple[int, int], Cell] = {}
        self.finished_at: dict[int, int] = {}  # request row → step of its last token

    def replay(self, steps: Iterator[tuple[HostPlan, StepRecord]]) -> list[StepRecord]:
        records = []
        for number, (plan, record) in enumerate(steps):
            self.check_regions(plan)
            self.check_step(number, plan, record)
            records.append(record)
        return records

    def check_regions(self, plan: HostPlan) -> None:
        capacity = self.sched.capacity
        for token, slot in enumerate(plan.source_slot):
            assert slot * capacity <= plan.write_index[token] < (slot + 1) * capacity
        for slot in range(self.sched.slots):
            if plan.query_counts[slot]:
                start, used = int(plan.k_start[slot]), int(plan.k_used[slot])
                assert slot * capacity <= start and start + used <= (slot + 1) * capacity
        assert plan.query_counts.sum() == len(plan.tokens)
        # Tokens are grouped by slot, in slot order.
        assert (np.diff(plan.source_slot) >= 0).all()

    def check_step(self, number: int, plan: HostPlan, record: StepRecord) -> None:
        first_token = np.concatenate([[0], np.cumsum(plan.query_counts)])
        for index, (slot, row, col) in enumerate(zip(plan.out_slot.tolist(), plan.out_row.tolist(),
                                                     plan.out_col.tolist(), strict=True)):
            tokens = slice(first_token[slot], first_token[slot + 1])
            assert plan.logit_rows[index] == first_token[slot + 1] - 1  # a slot's last token gives its next
            if row in record.admitted:
                self.check_prefill(plan, slot, self.by_row[row], tokens, col)
            elif row != self.sched.trash_row:
                self.check_decode(plan, slot, row, col, tokens)
            else:
                assert col == self.sched.trash_col
                continue
            assert (row, col) not in self.cells, f"request {row} column {col} planned twice"
            self.cells[row, col] = Cell(number, slot)
            if col == self.by_row[row].output_length - 1:
                self.finished_at[row] = number

    def check_prefill(self, plan: HostPlan, slot: int, request: Request, tokens: slice, col: int) -> None:
        base, prompt = slot * self.sched.capacity, list(request.prompt)
        pad = int(plan.query_counts[slot]) - len(prompt)
        assert pad >= 0 and col == 0
        assert plan.tokens[tokens].tolist() == [PAD_ID] * pad + prompt
        assert plan.positions[tokens].tolist() == [0] * pad + list(range(len(prompt)))
        assert plan.write_index[tokens].tolist() == list(range(base, base + pad + len(prompt)))
        assert (plan.k_start[slot], plan.k_used[slot]) == (base + pad, len(prompt))
        self.occupant[slot] = (request, pad)

    def check_decode(self, plan: HostPlan, slot: int, row: int, col: int, tokens: slice) -> None:
        request, pad = self.occupant[slot]
        assert request.row == row, f"slot {slot} decodes for request {row} but serves {request.row}"
        assert 0 < col < request.output_length
        prompt, base = len(request.prompt), slot * self.sched.capacity
        assert plan.tokens[tokens].tolist() == [-1] and plan.source_slot[tokens].tolist() == [slot]
        assert plan.positions[tokens].tolist() == [prompt + col - 1]
        assert plan.write_index[tokens].tolist() == [base + pad + prompt + col - 1]
        assert (plan.k_start[slot], plan.k_used[slot]) == (base + pad, prompt + col)
        # Its previous column was produced by the same slot one step earlier.
        assert self.cells[row, col - 1].slot == slot


def run(strategy: str, reqs: Sequence[Request], slots: int = SLOTS) -> tuple[Tracker, list[StepRecord]]:
    sched = scheduler(reqs, slots)
    tracker = Tracker(sched, reqs)
    return tracker, tracker.replay(plans(strategy, sched, reqs))  # type: ignore[arg-type]


def utilization(records: Sequence[StepRecord]) -> float:
    return sum(r.useful_decodes for r in records) / sum(r.decode_slots for r in records)


def static_run(strategy: str) -> tuple[list[list[Request]], list[StepRecord]]:
    """The batches a static strategy forms of `requests()`, and the records of its pass."""
    reqs = requests()
    ordered = sorted_order(reqs) if strategy == "sorted" else reqs
    return static_batches(ordered, SLOTS), run(strategy, reqs)[1]


@pytest.mark.parametrize("strategy", ["static", "sorted", "continuous"])
@pytest.mark.parametrize("slots", [1, 2, 3, 4, 16])
def test_every_output_token_is_planned_once_in_its_own_cell(strategy: str, slots: int) -> None:
    reqs = requests()
    tracker, records = run(strategy, reqs, slots)
    assert set(tracker.cells) == {(r.row, col) for r in reqs for col in range(r.output_length)}
    assert sum(r.useful_decodes for r in records) + sum(len(r.admitted) for r in records) == sum(OUTPUTS)
    assert sorted(row for r in records for row in r.admitted) == [r.row for r in reqs]  # each admitted once
    assert sum(r.prompt_tokens for r in records) == sum(PROMPTS)


@pytest.mark.parametrize("strategy", ["static", "sorted"])
def test_static_batches_decode_until_their_longest_output(strategy: str) -> None:
    batches, records = static_run(strategy)
    expected_kinds = []
    for batch in batches:
        expected_kinds += ["prefill"] + ["decode"] * (max(r.output_length for r in batch) - 1)
    assert [r.kind for r in records] == expected_kinds
    # Every decode step computes every slot, finished or empty ones included.
    assert all(r.decode_slots == SLOTS for r in records if r.kind == "decode")
    prefills = [r for r in records if r.kind == "prefill"]
    assert [r.admitted for r in prefills] == [[q.row for q in batch] for batch in batches]


def test_sorted_order_groups_by_output_then_prompt_length() -> None:
    ordered = sorted_order(requests())
    keys = [(r.output_length, len(r.prompt)) for r in ordered]
    assert keys == sorted(keys)


@pytest.mark.parametrize("strategy", ["static", "sorted"])
def test_static_prompts_are_left_padded_to_their_batch_longest(strategy: str) -> None:
    batches, records = static_run(strategy)
    prefills = [r for r in records if r.kind == "prefill"]
    for batch, record in zip(batches, prefills, strict=True):
        width = max(len(r.prompt) for r in batch)
        assert record.pad_tokens == sum(width - len(r.prompt) for r in batch)
        assert record.prompt_tokens == sum(len(r.prompt) for r in batch)


def test_continuous_batching_never_pads() -> None:
    _, records = run("continuous", requests())
    assert sum(r.pad_tokens for r in records) == 0


def test_continuous_refills_a_slot_at_the_step_after_it_frees() -> None:
    reqs = requests()
    tracker, records = run("continuous", reqs)
    by_slot: dict[int, list[int]] = {}
    for row in (row for r in records for row in r.admitted):
        by_slot.setdefault(tracker.cells[row, 0].slot, []).append(row)
    refills = 0
    for rows in by_slot.values():
        for previous, following in pairwise(rows):
            assert tracker.cells[following, 0].step == tracker.finished_at[previous] + 1
            refills += 1
    assert refills == len(reqs) - SLOTS
    # Requests are admitted in arrival order.
    assert [row for r in records for row in r.admitted] == [r.row for r in reqs]
    kinds = [r.kind for r in records]
    assert kinds[0] == "prefill" and kinds.count("mixed") > 0
    assert all(r.admitted for r in records if r.kind in ("prefill", "mixed"))
    assert not any(r.admitted for r in records if r.kind == "decode")


def test_continuous_ends_with_the_last_token() -> None:
    tracker, records = run("continuous", requests())
    assert len(records) == max(tracker.finished_at.values()) + 1


def test_continuous_pure_decode_steps_have_every_slot() -> None:
    """A pure decode step keeps a fixed shape (one token per slot, a CUDA graph's shape), idle slots too."""
    sched = scheduler(requests())
    for plan, record in sched.continuous(requests()):
        if record.kind == "decode":
            assert plan.decode_only and len(plan.tokens) == SLOTS


@pytest.mark.parametrize("seed", range(5))
def test_continuous_uses_slots_at_least_as_well_as_static(seed: int) -> None:
    rng = np.random.default_rng(seed)
    reqs = requests(rng.integers(1, 12, size=20).tolist(), rng.integers(1, 16, size=20).tolist())
    _, static = run("static", reqs, 4)
    _, continuous = run("continuous", reqs, 4)
    assert utilization(continuous) >= utilization(static)
    assert sum(r.kind == "mixed" for r in continuous) > 0
    assert len(continuous) < len(static)


def test_equal_lengths_give_full_utilization_in_every_strategy() -> None:
    reqs = requests(PROMPTS[:9], [5] * 9)
    for strategy in ("static", "sorted", "continuous"):
        _, records = run(strategy, reqs)
        assert utilization(records) == 1.0, strategy


def test_a_batch_larger_than_the_slots_is_refused() -> None:
    reqs = requests()
    with pytest.raises(ValueError, match="exceeds 3 slots"):
        list(scheduler(reqs).batch(reqs))


# --- token buckets -------------------------------------------------------------------------------------------

def test_token_buckets_round_a_step_up_to_the_next_multiple_until_the_limit() -> None:
    buckets = TokenBuckets(step=64, limit=1024)
    assert [buckets.fit(n) for n in (1, 64, 65, 1000, 1024, 1025)] == [64, 64, 128, 1024, 1024, None]
    assert list(buckets.sizes()) == list(range(64, 1025, 64))
    with pytest.raises(ValueError, match="positive step that divides the limit"):
        TokenBuckets(step=48, limit=100)


def trash_free(plan: HostPlan, slots: int) -> tuple[list[list[int]], list[list[int]]]:
    """A plan's real tokens and real outputs, field by field, leaving out a padding segment and trash outputs."""
    real = int(plan.query_counts[:slots].sum())
    outputs = int((plan.out_slot < slots).sum())
    per_token = [getattr(plan, name)[:real].tolist() for name in ("tokens", "source_slot", "positions",
                                                                  "write_index")]
    per_slot = [getattr(plan, name)[:slots].tolist() for name in ("query_counts", "k_start", "k_used")]
    per_output = [getattr(plan, name)[:outputs].tolist() for name in ("logit_rows", "out_slot", "out_row",
                                                                      "out_col")]
    return per_token + per_slot, per_output


@pytest.mark.parametrize("slots", [1, 3, 16])
def test_bucketed_steps_are_the_unbucketed_ones_padded_into_scratch_and_trash(slots: int) -> None:
    reqs, buckets = requests(), TokenBuckets(step=8, limit=56)
    plain, bucketed = scheduler(reqs, slots), scheduler(reqs, slots)
    bucketed.buckets = buckets
    scratch = slots * plain.capacity
    padded = 0
    for (before, record), (after, padded_record) in zip(plain.continuous(reqs), bucketed.continuous(reqs),
                                                        strict=True):
        assert trash_free(before, slots) == trash_free(after, slots)
        size = buckets.fit(len(before.tokens)) if record.kind != "decode" else None
        if size is None:
            assert not padded_record.bucketed and len(after.tokens) == len(before.tokens)
            continue
        padded += 1
        pads = size - len(before.tokens)
        assert padded_record.bucketed and padded_record.bucket_pad_tokens == pads and len(after.tokens) == size
        # The padding: one segment of the trash slot, keys in the scratch rows, attending to its own keys only.
        assert after.source_slot[len(before.tokens):].tolist() == [slots] * pads
        assert after.write_index[len(before.tokens):].tolist() == list(range(scratch, scratch + pads))
        assert (after.query_counts[slots], after.k_start[slots], after.k_used[slots]) == (pads, scratch, pads)
        # One output per slot; those nobody asked for go to the trash slot, row and column.
        assert len(after.out_slot) == slots
        filler = after.out_slot == slots
        assert filler.sum() == slots - len(before.out_slot)
        assert (after.out_row[filler] == plain.trash_row).all() and (after.out_col[filler] == plain.trash_col).all()
    assert padded > 0


def test_only_continuous_batching_pads_its_steps() -> None:
    reqs = requests()
    for strategy in ("static", "sorted"):
        sched = scheduler(reqs)
        sched.buckets = TokenBuckets(step=8, limit=1024)
        assert not any(record.bucketed for _, record in plans(strategy, sched, reqs))  # type: ignore[arg-type]
