"""A scaling axis (`gpus: [1, 2, 4]`, or `[all]`): the same rows measured at each GPU count, one launch per count.

Each count runs as a padding job of its own on that many ranks, in children started one after the other (as a
tune's trials are), so a count that runs out of memory stops only itself and no count shares its GPUs with
another. Their rows are merged into one result, each row stating the count it ran on, its tokens/s per GPU and
its scaling efficiency: its tokens/s per GPU over that of the same row (strategy, kernel, batch size, experts)
at the smallest count that measured it. The batch size is each rank's, so every count computes the same work
per GPU and a perfect scaling keeps tokens/s per GPU flat (weak scaling).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.parallel import ScalingPoint, scaling_counts
from padbench.contract.results import PartialResult
from padbench.contract.training import precision_run
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.worker.jobs import PartialFn, spec_json
from padbench.worker.runtime.launcher import launch_job
from padbench.worker.runtime.progress import ProgressFn

RUN_JOB = "padbench.worker.jobs:run_job"
RowKey = tuple[str, str, int | None, str | None]


@dataclass(frozen=True)
class CountRun:
    """What one GPU count's launch gave: its result (partial while it runs), and why it failed where it did. A
    count that failed after handing over rows keeps them, its other rows failed with the reason."""

    gpus: int
    result: PaddingResult | None
    error: str | None = None


def owned_gpus() -> int:
    """The GPUs this job holds: those its worker made visible, else every GPU of the machine (none on a CPU)."""
    visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
    if visible:
        return len(visible)
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def count_spec(spec: PaddingJobSpec, gpus: int, largest: int) -> PaddingJobSpec:
    """The job one count runs. Training's `precision: auto` is resolved once, as the largest count resolves it,
    so every count keeps its weights the same way: left to each count, one GPU trains in bf16 and several in amp
    (fp32 master weights), and the efficiency would measure that difference beside the scaling."""
    update: dict[str, Any] = {"gpus": gpus}
    if spec.mode == "training" and spec.training.precision == "auto" and \
            precision_run("auto", spec.dtype, largest) == "amp":
        update["training"] = spec.training.model_copy(update={"precision": "amp"})
    return spec.model_copy(update=update)


def row_key(row: StrategyResult) -> RowKey:
    return row.layout_label, row.kernel, row.batch_size, row.experts


def run_scaling(spec: PaddingJobSpec, progress: ProgressFn, on_partial: PartialFn) -> PaddingResult:
    assert isinstance(spec.gpus, list)
    counts = scaling_counts(spec.gpus, owned_gpus())
    runs: list[CountRun] = []
    for number, gpus in enumerate(counts):
        relay = RowRelay(spec, runs, gpus, len(counts), on_partial)
        count_progress = _count_progress(progress, number, len(counts), gpus)
        runs.append(_run_count(count_spec(spec, gpus, max(counts)), count_progress, relay))
        if number + 1 < len(counts) and any(run.result for run in runs):
            on_partial(merged(spec, runs, planned_counts=len(counts)))
    return merged(spec, runs, planned_counts=len(counts))


@dataclass
class RowRelay:
    """Each partial result a count's child hands over (a row finished), passed on at once beside the counts
    before it, so a stop in the middle of a count keeps the rows it finished; the latest is kept, as the
    count's rows should its child fail."""

    spec: PaddingJobSpec
    runs: list[CountRun]
    gpus: int
    planned_counts: int
    on_partial: PartialFn
    latest: PaddingResult | None = None

    def __call__(self, value: Any) -> None:
        result = JOB_RESULT_ADAPTER.validate_python(value)
        if isinstance(result, PaddingResult) and result.strategies:
            self.latest = result
            self.on_partial(merged(self.spec, [*self.runs, CountRun(self.gpus, result)], self.planned_counts))


def _count_progress(progress: ProgressFn, number: int, counts: int, gpus: int) -> Callable[[float, str], None]:
    """A count's progress as its share of the job's bar, the message naming the count."""

    def relay(fraction: float, message: str = "") -> None:
        progress((number + fraction) / counts, f"{gpus} GPU(s): {message}")

    return relay


def _run_count(spec: PaddingJobSpec, progress: Callable[[float, str], None], relay: RowRelay) -> CountRun:
    """Launch one count's job (`spec`, from `count_spec`) on as many ranks as it names."""
    assert isinstance(spec.gpus, int)
    gpus = spec.gpus
    report = launch_job(RUN_JOB, spec_json(spec), ranks=gpus, on_progress=progress, on_finished=relay)
    if report.outcome != "ok":
        what = "ran out of memory" if report.outcome == "oom" else report.outcome
        return CountRun(gpus, relay.latest, f"{gpus} GPU(s) {what}: {report.error}")
    result = JOB_RESULT_ADAPTER.validate_python(report.value)
    assert isinstance(result, PaddingResult)
    return CountRun(gpus, result)


def _per_gpu(row: StrategyResult, gpus: int) -> float | None:
    if row.status != "ok" or row.tokens_per_s is None:
        return None
    return row.per_rank.tokens_per_s_per_gpu if row.per_rank is not None and \
        row.per_rank.tokens_per_s_per_gpu is not None else row.tokens_per_s / gpus


def _failed_rows(template: list[StrategyResult], run: CountRun) -> list[StrategyResult]:
    """The rows of `template` a count that failed did not hand over, each failed with its reason."""
    finished = set() if run.result is None else {row_key(row) for row in run.result.strategies}
    return [StrategyResult(strategy=row.strategy, n_bins=row.n_bins, pad_to_multiple_of=row.pad_to_multiple_of,
                           crosses_documents=row.crosses_documents, attention=row.attention, kernel=row.kernel,
                           experts=row.experts, batch_size=row.batch_size, status="failed", error=run.error,
                           scaling=ScalingPoint(gpus=run.gpus)) for row in template if row_key(row) not in finished]


def scaled_rows(runs: list[CountRun]) -> list[StrategyResult]:
    """Every count's rows, smallest count first, each with its scaling point against the smallest count that
    measured the same row."""
    template = max((run.result.strategies for run in runs if run.result is not None), key=len)
    baseline: dict[RowKey, tuple[int, float]] = {}
    rows: list[StrategyResult] = []
    for run in runs:
        for row in [] if run.result is None else run.result.strategies:
            per_gpu = _per_gpu(row, run.gpus)
            if per_gpu is not None:
                baseline.setdefault(row_key(row), (run.gpus, per_gpu))
            base = baseline.get(row_key(row))
            efficiency = None if per_gpu is None or base is None or base[1] <= 0 else per_gpu / base[1]
            rows.append(row.model_copy(update={"scaling": ScalingPoint(
                gpus=run.gpus, tokens_per_s_per_gpu=per_gpu, efficiency=efficiency,
                baseline_gpus=None if efficiency is None or base is None else base[0])}))
        if run.error is not None:
            rows += _failed_rows(template, run)
    return rows


def _still_running(run: CountRun) -> PartialResult | None:
    """The partial marker of a count whose child is still handing over rows; None for one that ended."""
    return run.result.partial if run.result is not None and run.error is None else None


def merged(spec: PaddingJobSpec, runs: list[CountRun], planned_counts: int) -> PaddingResult:
    """One result of the counts run so far (marked partial while counts remain). The job-wide figures are the
    largest measured count's: the model, data and environment are the same for every count."""
    results = [run.result for run in runs if run.result is not None]
    if not results:
        raise RuntimeError("no GPU count of the scaling axis ran: " + "; ".join(run.error or "" for run in runs))
    rows = scaled_rows(runs)
    running = _still_running(runs[-1])
    whole_count = max([len(result.strategies) for result in results] + ([running.rows_planned] if running else []))
    to_come = whole_count * (planned_counts - len(runs))
    to_come += 0 if running is None else running.rows_planned - running.rows_finished
    partial = None if len(runs) == planned_counts and running is None else PartialResult(
        rows_finished=len(rows), rows_planned=len(rows) + to_come,
        last_row_measured_only=running is not None and running.last_row_measured_only)
    return results[-1].model_copy(update={"spec": spec, "strategies": rows, "partial": partial})
