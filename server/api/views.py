"""ORM rows → API bodies from the shared contract."""

from __future__ import annotations

from padbench.contract.api import Capabilities, JobOut, JobStatus, WorkerOut
from padbench.server.db.models import Job, Worker


def job_out(job: Job, worker_name: str | None) -> JobOut:
    return JobOut(
        id=job.id,
        kind=job.kind,
        name=job.name,
        status=JobStatus(job.status),
        progress=job.progress,
        progress_message=job.progress_message,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        worker=worker_name,
        submitter=job.submitter,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        error=job.error,
        cancel_requested=job.cancel_requested,
        spec=job.spec,
    )


def worker_out(worker: Worker) -> WorkerOut:
    return WorkerOut(
        id=worker.id,
        name=worker.name,
        capabilities=Capabilities.model_validate(worker.capabilities),
        registered_at=worker.registered_at,
    )
