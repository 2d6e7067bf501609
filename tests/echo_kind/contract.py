"""The echo kind's spec and result models."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from padbench.contract.bounds import Label
from padbench.contract.job_kind import JobKind
from padbench.contract.results import JobResultBase, PartialResult, check_partial_rows
from padbench.contract.spec import JobSpecBase


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


JOB_KIND = JobKind(spec=EchoJobSpec, result=EchoResult, runner="tests.echo_kind.runner")
