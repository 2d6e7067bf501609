"""`echo`: a job kind that exists only in the tests, registered with one line per layer and nothing else.

It repeats a word: the spec names the word and how many times, the runner "measures" one row per time
(handing each over as it goes, as real kinds do), the report prints a table and CSV rows, and the server's
policy requires nothing beyond the kind. `registered()` adds it to every registry and takes it out again,
so a test proves a new kind flows through padbench without an edit anywhere else.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from padbench.contract.bounds import Label
from padbench.contract.kinds import JOB_KINDS, register_job_kind
from padbench.contract.registry import Registry
from padbench.contract.results import Environment, JobResultBase, PartialResult, check_partial_rows
from padbench.contract.spec import JobSpecBase
from padbench.report.kind import REPORTS, CompareRule, KindReport, RunFacts
from padbench.server.kinds.base import KIND_POLICIES, JobCost, KindPolicy, device_requirements, no_paths
from padbench.worker.jobs import JOB_RUNNERS, PartialFn
from padbench.worker.runtime.progress import ProgressFn

KIND = "echo"


class EchoJobSpec(JobSpecBase):
    kind: Literal["echo"]
    word: Label = "hello"
    times: Annotated[int, Field(ge=1, le=10)] = 3
    device: Literal["cuda", "cpu", "auto"] = "auto"


class EchoResult(JobResultBase):
    kind: Literal["echo"] = "echo"
    spec: EchoJobSpec
    lines: Annotated[list[Label], Field(max_length=10)]
    partial: PartialResult | None = None

    @model_validator(mode="after")
    def _partial_counts_the_rows(self) -> EchoResult:
        check_partial_rows(self.partial, len(self.lines))
        return self


class EchoRunner:
    def run(self, spec: EchoJobSpec, progress: ProgressFn, on_partial: PartialFn) -> EchoResult:
        environment = Environment(hostname=platform.node() or "test", device="cpu", python=platform.python_version(),
                                  torch="none", started_at="2026-11-25T00:00:00+00:00")
        lines: list[str] = []
        for number in range(1, spec.times + 1):
            lines.append(f"{number}: {spec.word}")
            progress(number / spec.times, f"said {spec.word!r} {number} of {spec.times} times")
            if number < spec.times:
                on_partial(EchoResult(spec=spec, environment=environment, lines=list(lines),
                                      partial=PartialResult(rows_finished=number, rows_planned=spec.times)))
        return EchoResult(spec=spec, environment=environment, lines=lines)

    def kernel_names(self, device: str) -> list[str]:
        return []


def render_table(result: EchoResult) -> str:
    return "\n".join([f"echo of {result.spec.word!r}", *result.lines]) + "\n"


def csv_rows(result: EchoResult) -> list[dict[str, Any]]:
    return [{"line": line} for line in result.lines]


def run_facts(result: EchoResult) -> RunFacts:
    return RunFacts(model=f"echo {result.spec.word}", dtype="text", mode="aloud")


def figures(result: EchoResult) -> dict[tuple[str, str], float | None]:
    return {(result.spec.word, "lines"): float(len(result.lines))}


REPORT = KindReport[EchoResult](
    noun="an echo job", plural="echo jobs", render_table=render_table, csv_rows=csv_rows, run_facts=run_facts,
    compare=CompareRule[EchoResult](figures=figures, key_names=("word", "what"), metric="lines",
                                    metric_label="lines said", show=lambda value: f"{value:.0f}",
                                    higher_is_faster=True))
POLICY = KindPolicy[EchoJobSpec](requirements=lambda spec: device_requirements(spec.device),
                                 cost=lambda spec: JobCost(tokens=0, flops=0.0), named_paths=no_paths)


@contextmanager
def _added(registry: Registry[Any], entry: Any) -> Iterator[None]:
    registry.add(KIND, entry)
    try:
        yield
    finally:
        registry.remove(KIND)


@contextmanager
def registered() -> Iterator[None]:
    """The echo kind in every registry (contract, report, worker runner, server policy) for the block."""
    with ExitStack() as stack:
        register_job_kind(EchoJobSpec, EchoResult)
        stack.callback(JOB_KINDS.remove, KIND)
        for registry, entry in ((REPORTS, REPORT), (JOB_RUNNERS, EchoRunner()), (KIND_POLICIES, POLICY)):
            stack.enter_context(_added(registry, entry))
        yield
