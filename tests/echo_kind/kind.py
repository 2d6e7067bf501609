"""The echo kind's record: its server policy, report, plot and metric, assembled."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from padbench.kinds.policy import JobCost, KindPolicy, device_requirements, no_paths
from padbench.kinds.record import KindMetric, KindSpec, Sample
from padbench.report.kind import CompareRule, KindReport, RunFacts
from tests.echo_kind.contract import JOB_KIND, EchoJobSpec, EchoResult


def render_table(result: EchoResult) -> str:
    return "\n".join([f"echo of {result.spec.word!r}", *result.lines]) + "\n"


def csv_rows(result: EchoResult) -> list[dict[str, Any]]:
    return [{"line": line} for line in result.lines]


def run_facts(result: EchoResult) -> RunFacts:
    return RunFacts(model=f"echo {result.spec.word}", dtype="text", mode="aloud")


def figures(result: EchoResult) -> dict[tuple[str, str], float | None]:
    return {(result.spec.word, "lines"): float(len(result.lines))}


def plot(plt: Any, jobs: list[tuple[int | None, EchoResult]]) -> Any:
    figure, axes = plt.subplots(1, 1, figsize=(6, 4))
    axes.bar([f"job {job_id}" for job_id, _ in jobs], [len(result.lines) for _, result in jobs])
    axes.set_ylabel("lines said")
    return figure


def lines_samples(result: EchoResult) -> Iterator[Sample]:
    yield (result.spec.word,), float(len(result.lines))


KIND = KindSpec[EchoJobSpec, EchoResult](
    contract=JOB_KIND,
    policy=KindPolicy[EchoJobSpec](requirements=lambda spec: device_requirements(spec.device),
                                   cost=lambda spec: JobCost(tokens=0, flops=0.0), named_paths=no_paths),
    report=KindReport[EchoResult](
        noun="an echo job", plural="echo jobs", render_table=render_table, csv_rows=csv_rows, run_facts=run_facts,
        compare=CompareRule[EchoResult](figures=figures, key_names=("word", "what"), metric="lines",
                                        metric_label="lines said", show=lambda value: f"{value:.0f}",
                                        higher_is_faster=True)),
    plot=plot,
    metrics=(KindMetric[EchoResult]("padbench_echo_lines", "lines the newest echo job said, per word", ("word",),
                                    lines_samples),),
)
