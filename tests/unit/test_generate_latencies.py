"""TTFT, TPOT and ITL as serving benchmarks define them, from the step times and the schedule's step records: each
request's tokens land at the end of the steps that give them, and the figures follow from those times alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.generate.contract import GenerateResult, GenerateRow
from padbench.worker.engine.decoding.cache import HostPlan
from padbench.worker.jobs.generate.figures import request_times, serving_latencies
from padbench.worker.jobs.generate.passes import PassTiming
from padbench.worker.jobs.generate.schedule import StepRecord
from tests.unit.test_generate_schedule import Tracker, requests, scheduler

STORED = Path(__file__).parents[2] / "docs" / "results" / "h200-2026-11-27" / "final-code-check" / "generate.json"


def timed(steps: Iterator[tuple[HostPlan, StepRecord]], seconds: list[float]) -> PassTiming:
    return PassTiming(tuple(seconds), tuple(record for _, record in steps))


def test_a_static_batch_of_two_requests() -> None:
    reqs = requests(prompts=(3, 2), outputs=(3, 2))
    timing = timed(scheduler(reqs, slots=2).batch(reqs), [0.010, 0.002, 0.003])  # the prefill, then two decode steps
    assert request_times(timing) == {0: (0.0, [0.010, 0.012, 0.015]), 1: (0.0, [0.010, 0.012])}
    figures = serving_latencies([timing])
    ttft, tpot, itl = (
        figures[name] for name in ("time_to_first_token", "time_per_output_token", "inter_token_latency")
    )
    assert ttft is not None and ttft.samples == 2 and ttft.p50_ms == pytest.approx(10.0)
    # TPOT per request: (latency − TTFT) / (output tokens − 1) = (15 − 10) / 2 and (12 − 10) / 1.
    assert tpot is not None and tpot.samples == 2 and tpot.mean_ms == pytest.approx((2.5 + 2.0) / 2)
    # ITL: every gap after a request's first token, 2 and 3 ms for the first request, 2 ms for the second. The
    # third decode slot of the second request (its answer already complete) is no token and no gap.
    assert itl is not None and itl.samples == 3 and itl.mean_ms == pytest.approx(7.0 / 3)


def test_a_request_admitted_mid_pass_counts_from_its_admission() -> None:
    reqs = requests(prompts=(2, 2), outputs=(3, 1))
    sched = scheduler(reqs, slots=1)
    records = Tracker(sched, reqs).replay(sched.continuous(reqs))
    # One slot: request 0's prefill and two decodes, then request 1's prefill, its only token.
    timing = PassTiming((0.004, 0.001, 0.001, 0.006), tuple(records))
    times = request_times(timing)
    assert times[1] == (pytest.approx(0.006), [pytest.approx(0.012)])
    figures = serving_latencies([timing])
    ttft, tpot = figures["time_to_first_token"], figures["time_per_output_token"]
    assert ttft is not None and sorted([ttft.p50_ms, ttft.mean_ms or 0]) == pytest.approx([5.0, 5.0])
    assert tpot is not None and tpot.samples == 1  # a one-token answer has no time per output token


def test_no_decoded_token_means_no_tpot_or_itl() -> None:
    reqs = requests(prompts=(2,), outputs=(1,))
    timing = timed(scheduler(reqs, slots=1).batch(reqs), [0.004])
    figures = serving_latencies([timing])
    assert figures["time_per_output_token"] is None and figures["inter_token_latency"] is None


def test_results_that_named_itl_tbt_read_it_under_its_name() -> None:
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    measured = [row for row in stored["rows"] if row.get("time_between_tokens")]
    assert measured, "the stored result has rows with the earlier name"
    result = JOB_RESULT_ADAPTER.validate_python(stored)
    assert isinstance(result, GenerateResult)
    rows = {(row.strategy, row.kernel, row.context): row for row in result.rows}
    for old in measured:
        row: GenerateRow = rows[(old["strategy"], old["kernel"], old.get("context"))]
        assert (
            row.inter_token_latency is not None
            and row.inter_token_latency.p50_ms == old["time_between_tokens"]["p50_ms"]
        )
        assert row.time_per_output_token is None  # not measured then: never made up from the other figures
    assert "time_between_tokens" not in JOB_RESULT_ADAPTER.dump_json(result).decode()
