"""ORM rows → API bodies from the shared contract."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from padbench.contract.api import Capabilities, JobOut, JobStatus, JobSummary, VerdictOut, WorkerOut
from padbench.contract.history import RegressionFlag
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.parallel import MAX_GPUS, GpuRequest
from padbench.contract.table import ResultTable
from padbench.kinds.record import kind_spec
from padbench.report.noise import verdict_out
from padbench.report.ranking import RankBy, ranked_table
from padbench.server.db.models import Job, Worker
from padbench.server.db.reads import RunningJob

# A result stored under an older contract that this server no longer reads still gets an answer, not a 500.
UNREADABLE_VERDICT = ("verdict: not available — the stored result does not match this server's result contract "
                      "(its /results document is served as stored)")


def device_of(capabilities: dict[str, Any] | None) -> str | None:
    """A worker's GPU by name, or its device (`cpu`) when it has none."""
    if not capabilities:
        return None
    return capabilities.get("gpu_name") or capabilities.get("device")


def job_summary(job: Job, worker_name: str | None, worker_capabilities: dict[str, Any] | None = None) -> JobSummary:
    return JobSummary(
        id=job.id,
        kind=job.kind,
        name=job.name,
        status=JobStatus(job.status),
        progress=job.progress,
        progress_message=job.progress_message,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        worker=worker_name,
        device=device_of(worker_capabilities),
        submitter=job.submitter,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        error=job.error,
        cancel_requested=job.cancel_requested,
    )


def job_out(job: Job, worker_name: str | None, worker_capabilities: dict[str, Any] | None = None,
            waiting_reason: str | None = None, regressions: Sequence[RegressionFlag] = ()) -> JobOut:
    return JobOut(**dict(job_summary(job, worker_name, worker_capabilities)), spec=job.spec,
                  waiting_reason=waiting_reason, regressions=list(regressions))


def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinite float replaced by None, at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [finite_json(item) for item in value]
    return value


def verdict_of(document: dict[str, Any], rank_by: RankBy = "speed") -> VerdictOut:
    """The verdict of a stored result document (already free of non-finite figures), ranked by speed or cost."""
    try:
        return verdict_out(JOB_RESULT_ADAPTER.validate_python(document), rank_by)
    except ValidationError:
        return VerdictOut(lines=[UNREADABLE_VERDICT])


def table_of(document: dict[str, Any], rank_by: RankBy = "speed") -> ResultTable:
    """The table of a stored result document: its kind's table model, its verdict ranked by speed or cost, or no
    columns for a kind without one."""
    try:
        result = JOB_RESULT_ADAPTER.validate_python(document)
    except ValidationError:
        return ResultTable(header=[UNREADABLE_VERDICT.replace("verdict", "table", 1)])
    build = kind_spec(result.kind).report.table
    return ResultTable() if build is None else ranked_table(build(result), result, rank_by)


def gpus_busy(capabilities: Capabilities, running: Sequence[RunningJob]) -> int | None:
    """How many of the worker's GPUs its running jobs hold; None for a worker without GPUs."""
    owned = capabilities.owned_gpus
    if owned == 0:
        return None
    return min(owned, sum(GpuRequest.from_stored(job.gpus, "auto").gpus_held(owned) for job in running))


def worker_out(worker: Worker, running: Sequence[RunningJob] = ()) -> WorkerOut:
    capabilities = Capabilities.model_validate(worker.capabilities)
    shown = [job.id for job in running][-MAX_GPUS:]
    return WorkerOut(
        id=worker.id,
        name=worker.name,
        capabilities=capabilities,
        registered_at=worker.registered_at,
        last_contact_at=worker.last_contact_at,
        running_job_id=shown[-1] if shown else None,
        running_job_ids=shown,
        gpus_busy=gpus_busy(capabilities, running),
    )
