"""A scaling axis in the contract: which lists are one, what it asks of a worker, which counts `[all]` means."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.parallel import ALL_GPUS, GpuRequest, RankFigures, RankShares, scaling_counts
from padbench.contract.results import Environment, PartialResult
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.kinds.padding.cost_verdict import cost_verdict_lines
from padbench.kinds.padding.verdict import verdict_lines
from padbench.report.efficiency import cost_lines, row_costs
from padbench.server.requirements import job_requirements, stored_gpus
from padbench.worker.jobs.padding.scaling import CountRun, RowRelay, count_spec, merged


def test_a_scaling_axis_asks_for_its_largest_count_as_one_process() -> None:
    spec = PaddingJobSpec(gpus=[1, 2, 4])
    request = GpuRequest.of(spec)
    assert request.gpus == 4 and request.launches_own_ranks and request.ranks(8) == 1
    assert stored_gpus(spec) == 4 and request.fits(4) and not request.fits(2)
    assert "device:cuda" in job_requirements(spec)  # a count above one spans GPUs
    every = PaddingJobSpec(gpus=["all"])
    assert stored_gpus(every) == ALL_GPUS and GpuRequest.of(every).ranks(8) == 1
    on_cpu = PaddingJobSpec(gpus=[1, 2], device="cpu")
    assert GpuRequest.of(on_cpu).fits(0) and "device:cuda" not in job_requirements(on_cpu)


def test_all_doubles_up_to_the_workers_gpus() -> None:
    assert scaling_counts(["all"], 8) == [1, 2, 4, 8]
    assert scaling_counts(["all"], 6) == [1, 2, 4, 6]
    assert scaling_counts(["all"], 1) == [1]
    assert scaling_counts([2, 4], 8) == [2, 4]


@pytest.mark.parametrize(("gpus", "device", "reason"), [
    ([2, 1], "auto", "smallest first"), ([2], "auto", "at least two"), ([1, 1], "auto", "at least two"),
    ([1, "all"], "auto", "stands alone"), (["all"], "cpu", "list the process counts"),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], "auto", "at most 8")])
def test_a_list_that_is_no_scaling_axis_is_refused(gpus: list[int | str], device: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        PaddingJobSpec.model_validate({"gpus": gpus, "device": device})


def padding_result(gpus: int, rates: dict[str, float]) -> PaddingResult:
    rows = [StrategyResult(strategy=name, attention="sdpa", kernel="sdpa", batch_size=4, status="ok",
                           tokens_per_s=rate,
                           per_rank=None if gpus == 1 else RankShares(
                               ranks=[RankFigures(rank=0, device="cpu", real_tokens=1, batches=1, measured_seconds=1)],
                               tokens_per_s_per_gpu=rate / gpus))
            for name, rate in rates.items()]
    environment = Environment(hostname="box", device="cuda", python="3.11", torch="2.13", started_at="2026-11-27")
    return PaddingResult(spec=PaddingJobSpec(gpus=gpus), environment=environment, model_parameters=1,
                         flops_per_token=1.0, num_sequences=1, real_tokens_total=1, strategies=rows)


def test_counts_merge_into_rows_with_their_efficiency_and_a_failed_count_fails_its_rows() -> None:
    spec = PaddingJobSpec(gpus=[1, 2, 4, 8])
    runs = [CountRun(1, padding_result(1, {"static": 100.0, "packed": 200.0})),
            CountRun(2, None, "2 GPU(s) ran out of memory: CUDA out of memory"),
            CountRun(4, padding_result(4, {"static": 360.0, "packed": 400.0}))]
    result = merged(spec, runs, planned_counts=4)
    assert result.spec.gpus == [1, 2, 4, 8] and result.partial is not None
    assert (result.partial.rows_finished, result.partial.rows_planned) == (6, 8)
    points = {(row.strategy, row.scaling.gpus): row for row in result.strategies if row.scaling is not None}
    assert points[("static", 4)].scaling.efficiency == pytest.approx(0.9)  # 90 tokens/s per GPU against 100
    assert points[("packed", 4)].scaling.efficiency == pytest.approx(0.5) and points[("packed", 4)].label == \
        "packed on 4 GPUs"
    failed = points[("static", 2)]
    assert failed.status == "failed" and "out of memory" in (failed.error or "") and failed.scaling.efficiency is None
    assert "winner packed on 4 GPUs" in verdict_lines(result)[0]  # judged at the largest count
    assert merged(spec, [*runs, CountRun(8, None, "lost")], planned_counts=4).partial is None
    with pytest.raises(RuntimeError, match="no GPU count"):
        merged(spec, [CountRun(1, None, "lost")], planned_counts=2)


def test_a_count_hands_its_rows_over_as_they_finish_and_keeps_them_if_it_fails() -> None:
    spec = PaddingJobSpec(gpus=[1, 2, 4])
    first = CountRun(1, padding_result(1, {"static": 100.0, "packed": 200.0}))
    one_row = padding_result(2, {"static": 180.0}).model_copy(
        update={"partial": PartialResult(rows_finished=1, rows_planned=2, last_row_measured_only=True)})
    handed: list[Any] = []
    relay = RowRelay(spec, [first], 2, 3, handed.append)
    relay(JOB_RESULT_ADAPTER.dump_python(one_row, mode="json"))
    (so_far,) = handed
    assert so_far.partial.rows_finished == 3 and so_far.partial.rows_planned == 6
    assert so_far.partial.last_row_measured_only and so_far.strategies[-1].label == "static on 2 GPUs"
    failed = merged(spec, [first, CountRun(2, relay.latest, "2 GPU(s) failed: rank 1 died")], planned_counts=3)
    at_two = [row for row in failed.strategies if row.scaling is not None and row.scaling.gpus == 2]
    assert [(row.strategy, row.status) for row in at_two] == [("static", "ok"), ("packed", "failed")]
    assert at_two[0].scaling is not None and at_two[0].scaling.efficiency == pytest.approx(0.9)
    assert failed.partial is not None and (failed.partial.rows_finished, failed.partial.rows_planned) == (4, 6)
    assert not failed.partial.last_row_measured_only


def test_every_count_trains_in_the_precision_its_largest_count_resolves() -> None:
    """Left to each count, `precision: auto` trains one GPU in bf16 and several in amp: the efficiency would
    measure the precision beside the scaling."""
    spec = PaddingJobSpec(gpus=[1, 2, 4], mode="training", dtype="bf16")
    assert {count_spec(spec, gpus, 4).training.precision for gpus in (1, 2, 4)} == {"amp"}
    assert count_spec(spec, 1, 4).gpus == 1
    fp32 = PaddingJobSpec(gpus=[1, 2], mode="training", dtype="fp32")
    assert count_spec(fp32, 1, 2).training.precision == "auto"  # fp32 trains in fp32 on any count
    stated = PaddingJobSpec(gpus=[1, 2], mode="training", dtype="bf16", training={"precision": "bf16"})
    assert count_spec(stated, 2, 2).training.precision == "bf16"


def test_each_row_of_a_scaling_axis_is_priced_on_the_gpus_its_count_held() -> None:
    runs = [CountRun(1, padding_result(1, {"packed": 1000.0})), CountRun(4, padding_result(4, {"packed": 3600.0}))]
    result = merged(PaddingJobSpec(gpus=[1, 4]), runs, planned_counts=2)
    result = result.model_copy(update={"environment": result.environment.model_copy(
        update={"price_per_gpu_hour": 3.6})})
    costs = row_costs(result)
    # One GPU for 1000 s a million tokens: $1; four GPUs for 278 s each: $1.11.
    assert costs[("packed on 1 GPU", "sdpa")] == pytest.approx(1.0)
    assert costs[("packed on 4 GPUs", "sdpa")] == pytest.approx(4 * 3.6 * 1e6 / (3600 * 3600.0))
    lines = cost_verdict_lines(result)
    assert lines is not None and "$1.111 per million tokens" in lines[0], lines
    assert "per GPU-hour × the GPUs of each row's count" in cost_lines(result)[0]
