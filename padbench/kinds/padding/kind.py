"""The `padding` kind: batching layouts (static, dynamic, binned, packed, wrapped) × attention kernels on one
model and corpus, in inference or training, ranked by tokens/s."""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.padding import cost_verdict, plot, policy, report, verdict
from padbench.kinds.padding.contract import JOB_KIND, PaddingJobSpec, PaddingResult
from padbench.kinds.record import KindMetric, KindSpec, Sample
from padbench.report.identity import device_name, model_name
from padbench.report.kind import KindReport


def throughput_samples(result: PaddingResult) -> Iterator[Sample]:
    for row in result.strategies:
        if row.status == "ok" and row.tokens_per_s is not None:
            labels = (device_name(result), model_name(result), result.spec.dtype, row.label, row.kernel)
            yield labels, row.tokens_per_s


KIND = KindSpec[PaddingJobSpec, PaddingResult](
    contract=JOB_KIND,
    policy=policy.POLICY,
    report=KindReport[PaddingResult](
        noun="a padding job", plural="padding jobs", render_table=report.render_table, csv_rows=report.csv_rows,
        run_facts=report.run_facts, compare=report.COMPARE, table=report.result_table,
        verdict=verdict.padding_verdict, cost_verdict=cost_verdict.padding_cost_verdict),
    plot=plot.padding_plot,
    metrics=(KindMetric[PaddingResult](
        "padbench_last_tokens_per_second",
        "tokens/s of the newest valid measurement per GPU, model, strategy and kernel",
        ("gpu", "model", "dtype", "strategy", "kernel"), throughput_samples),),
)
