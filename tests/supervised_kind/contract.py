"""The supervised kind's spec: what its test child does. Its results are padding results (what the children
return), so it has no result of its own worth more than the kind's tag."""

from __future__ import annotations

from typing import ClassVar, Literal

from padbench.contract.job_kind import JobKind
from padbench.contract.results import JobResultBase, PartialResult
from padbench.contract.spec import DataSpec, JobSpecBase


class SupervisedJobSpec(JobSpecBase):
    kind: Literal["supervised"]
    pid_file: str | None = None  # where the child writes its pid
    mib: int = 0  # memory the child holds
    record: str | None = None  # where the child records the GPUs it was given
    seconds: float = 0.0  # how long the child runs
    data: DataSpec | None = None  # file names the worker must confine to its roots
    SPANS_GPUS: ClassVar[bool] = True


class SupervisedResult(JobResultBase):
    kind: Literal["supervised"] = "supervised"
    spec: SupervisedJobSpec
    partial: PartialResult | None = None


JOB_KIND = JobKind(spec=SupervisedJobSpec, result=SupervisedResult, runner="tests.unit.supervisor_targets")
