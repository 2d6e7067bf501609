"""The `generate` kind: serving a model's requests with continuous batching over a KV cache, beside
transformers' own generation as the reference, ranked by output tokens/s."""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.generate import cost_verdict, plot, policy, report, verdict
from padbench.kinds.generate.contract import JOB_KIND, GenerateJobSpec, GenerateResult
from padbench.kinds.record import KindMetric, KindSpec, Sample
from padbench.report.identity import device_name, model_name
from padbench.report.kind import KindReport


def output_rate_samples(result: GenerateResult) -> Iterator[Sample]:
    for row in result.rows:
        if row.status == "ok" and row.output_tokens_per_s is not None:
            labels = (device_name(result), model_name(result), result.spec.dtype, row.strategy, row.kernel,
                      str(row.context or ""))
            yield labels, row.output_tokens_per_s


KIND = KindSpec[GenerateJobSpec, GenerateResult](
    contract=JOB_KIND,
    policy=policy.POLICY,
    report=KindReport[GenerateResult](
        noun="a generate job", plural="generate jobs", render_table=report.render_table, csv_rows=report.csv_rows,
        run_facts=report.run_facts, compare=report.COMPARE, table=report.result_table,
        verdict=verdict.generate_verdict, cost_verdict=cost_verdict.generate_cost_verdict),
    plot=plot.generate_plot,
    metrics=(KindMetric[GenerateResult](
        "padbench_last_output_tokens_per_second",
        "output tokens/s of the newest valid generate measurement per GPU, model, strategy (or reference), "
        "kernel and context length",
        ("gpu", "model", "dtype", "strategy", "kernel", "context"), output_rate_samples),),
)
