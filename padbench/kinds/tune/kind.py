"""The `tune` kind: the fastest configuration that fits (layout, kernel, batch size, activation checkpointing,
compile, precision) for a model, data and GPUs, found by trials within a time budget."""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.record import KindMetric, KindSpec, Sample
from padbench.kinds.tune import plot, policy, report
from padbench.kinds.tune.contract import JOB_KIND, TuneJobSpec, TuneResult
from padbench.report.identity import device_name, model_name
from padbench.report.kind import KindReport


def best_samples(result: TuneResult) -> Iterator[Sample]:
    finalist = next((finalist for finalist in result.finalists if finalist.status == "ok"), None)
    if finalist is not None and finalist.tokens_per_s is not None:
        labels = (device_name(result), model_name(result), result.spec.mode,
                  result.trials[finalist.trial].config.label)
        yield labels, finalist.tokens_per_s


KIND = KindSpec[TuneJobSpec, TuneResult](
    contract=JOB_KIND,
    policy=policy.POLICY,
    report=KindReport[TuneResult](
        noun="a tune", plural="tunes", render_table=report.render_table, csv_rows=report.csv_rows,
        run_facts=report.run_facts, compare=report.COMPARE, table=report.result_table,
        verdict=report.tune_verdict),
    plot=plot.tune_plot,
    metrics=(KindMetric[TuneResult](
        "padbench_tune_best_tokens_per_second", "tokens/s of the newest tune's chosen configuration per GPU, "
        "model and mode", ("gpu", "model", "mode", "configuration"), best_samples),),
)
