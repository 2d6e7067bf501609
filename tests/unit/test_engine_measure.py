"""The timing loop's stopping rules, validity and aggregation, on a fake clock (no sleeps, no real time)."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch

from padbench.contract.spec import MeasurementSpec
from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch
from padbench.worker.engine.measure.timing import (
    Measurement,
    PerfCounterClock,
    RepeatTiming,
    batch_sanity_error,
    invalid_reason,
    mean_call_milliseconds,
    measure,
    summarize,
)


class FakeDevice:
    """A step costs `seconds[index]` of fake device time; the clock reads that time."""

    def __init__(self, seconds: list[float]) -> None:
        self.seconds = seconds
        self.now = 0.0
        self.issued: list[int] = []
        self.collects = 0
        self._marks: list[float] = []

    def step(self, index: int) -> None:
        self.issued.append(index)
        self.now += self.seconds[index]

    def start(self) -> None:
        self._marks = [self.now]

    def mark(self) -> None:
        self._marks.append(self.now)

    def collect(self) -> list[float]:
        self.collects += 1
        return [end - begin for begin, end in pairwise(self._marks)]


def test_runs_whole_passes_until_both_minima_are_met() -> None:
    device = FakeDevice([0.1, 0.1, 0.1])
    settings = MeasurementSpec(warmup_batches=2, min_seconds=1.0, min_batches=4, repeats=1)
    result = measure(device.step, 3, settings, device)
    repeat = result.repeats[0]
    # 1.0 s needs 10 batches; whole passes of 3 round that up to 12, every batch issued 4 times.
    assert repeat.batches == 12
    assert [repeat.batch_indices.count(i) for i in range(3)] == [4, 4, 4]
    assert repeat.seconds == pytest.approx(1.2)
    assert result.warmup_seconds == pytest.approx(0.2)
    assert device.issued[:2] == [0, 1]  # warm-up cycles over the batches too
    assert invalid_reason(result, settings) is None


def test_the_device_is_waited_on_once_per_pass_not_per_batch() -> None:
    device = FakeDevice([0.5] * 4)
    settings = MeasurementSpec(warmup_batches=0, min_seconds=3.0, min_batches=1, repeats=1)
    measure(device.step, 4, settings, device)
    assert device.collects == 1 + 2  # the (empty) warm-up, then two passes of four batches


def test_min_batches_alone_keeps_a_fast_run_going() -> None:
    device = FakeDevice([0.001, 0.001])
    settings = MeasurementSpec(warmup_batches=0, min_seconds=0.0, min_batches=7)
    assert measure(device.step, 2, settings, device).repeats[0].batches == 8


def test_a_run_capped_below_the_minima_is_invalid_with_its_reason() -> None:
    device = FakeDevice([0.01] * 5)
    short = MeasurementSpec(warmup_batches=0, min_seconds=10.0, min_batches=3, max_batches=4)
    reason = invalid_reason(measure(device.step, 5, short, device), short)
    assert reason is not None and "shorter than min_seconds=10" in reason and "max_batches=4" in reason

    few = MeasurementSpec(warmup_batches=0, min_seconds=0.0, min_batches=10, max_batches=2, repeats=1)
    reason = invalid_reason(measure(device.step, 5, few, device), few)
    assert reason == "measured 2 batches, fewer than min_batches=10"


def test_repeats_are_measured_separately_and_each_must_be_valid() -> None:
    device = FakeDevice([0.25, 0.25])
    settings = MeasurementSpec(warmup_batches=1, min_seconds=1.0, min_batches=2, repeats=3)
    result = measure(device.step, 2, settings, device)
    assert [r.batches for r in result.repeats] == [4, 4, 4]
    bad = Measurement(1, 0.1, (*result.repeats[:2], RepeatTiming((0,), (0.25,))))
    assert invalid_reason(bad, settings) == "repeat 3: measured 1 batches, fewer than min_batches=2"


def test_headline_is_total_tokens_over_total_time_not_a_median_of_batches() -> None:
    # One big slow batch and one tiny fast one: the per-batch median flatters the tiny batch.
    timing = Measurement(0, 0.0, (RepeatTiming((0, 1, 0, 1), (1.0, 0.001, 1.0, 0.001)),))
    result = summarize(timing, real_tokens=[10_000, 100], computed_tokens=[12_000, 100], flops=[5.0, 1.0])
    assert result.tokens_per_s == pytest.approx(20_200 / 2.002)
    assert result.median_batch_tokens_per_s == pytest.approx((10_000 + 100_000) / 2)
    assert result.real_tokens == 20_200 and result.computed_tokens == 24_200 and result.batches == 4
    assert result.flops == 12.0
    assert summarize(timing, [10_000, 100], [12_000, 100], [5.0, None]).flops is None


def test_p90_and_per_repeat_figures() -> None:
    timing = Measurement(0, 0.0, (RepeatTiming(tuple(range(10)), (1.0,) * 10), RepeatTiming((0,), (2.0,))))
    result = summarize(timing, real_tokens=list(range(1, 11)), computed_tokens=[10] * 10, flops=[None] * 10)
    # Per-batch figures 0.5, 1, 2, …, 10: the inclusive 90th percentile of 11 values is the 10th.
    assert result.p90_batch_tokens_per_s == pytest.approx(9.0)
    assert result.repeat_tokens_per_s == pytest.approx((5.5, 0.5))


def test_perf_counter_clock_measures_each_batch() -> None:
    clock = PerfCounterClock()
    clock.start()
    for _ in range(3):
        torch.ones(1000).sum()
        clock.mark()
    seconds = clock.collect()
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)


def _padded(lengths: tuple[int, ...], width: int) -> PaddedBatch:
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    return PaddedBatch(ids, torch.ones_like(ids), lengths, tuple(range(len(lengths))))


def test_sanity_check_rejects_impossible_token_counts() -> None:
    assert batch_sanity_error(_padded((3, 5), width=5), max_length=8) is None
    assert "must be positive" in (batch_sanity_error(_padded((), width=5), max_length=8) or "")
    assert "above rows × max_length" in (batch_sanity_error(_padded((9, 9), width=20), max_length=8) or "")
    assert "computes only" in (batch_sanity_error(_padded((5, 6), width=4), max_length=8) or "")
    assert "outside 1..8" in (batch_sanity_error(_padded((0, 6), width=8), max_length=8) or "")


def test_sanity_check_counts_a_pack_by_its_sequences() -> None:
    ids = torch.zeros(1, 7, dtype=torch.long)
    pack = PackedBatch(ids, ids, torch.tensor([0, 3, 7], dtype=torch.int32), 4, (3, 4), (0, 1), token_budget=8)
    assert batch_sanity_error(pack, max_length=4) is None
    assert batch_sanity_error(pack, max_length=3) is not None


def test_the_warm_up_runs_the_first_batches_then_any_others_asked_for_once() -> None:
    from padbench.worker.engine.measure.timing import warmup_order

    assert warmup_order(5, 3) == [0, 1, 2] and warmup_order(2, 3) == [0, 1, 0]
    assert warmup_order(6, 2, also=[0, 4, 1, 5]) == [0, 1, 4, 5]
    assert warmup_order(6, 1, also=[3, 5, 3]) == [0, 3, 5]  # each batch once beyond the first `count`
    device = FakeDevice([0.1] * 6)
    result = measure(device.step, 6, MeasurementSpec(warmup_batches=1, min_seconds=0, min_batches=1, repeats=1),
                     device, warmup=[0, 3])
    assert device.issued[:2] == [0, 3] and result.warmup_batches == 2


def test_mean_call_milliseconds_runs_the_warm_up_then_the_timed_calls() -> None:
    calls: list[int] = []
    mean = mean_call_milliseconds(lambda: calls.append(1), torch.device("cpu"), times=4, warmup=2)
    assert len(calls) == 6 and mean >= 0
