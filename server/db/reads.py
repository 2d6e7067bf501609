"""Read-only queries (no state changes live here: those are in `padbench.server.queue`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CompoundSelect, Select, and_, func, select, union
from sqlalchemy.orm import Session, defer

from padbench.contract.api import Capabilities, JobStatus
from padbench.server.db.clock import db_now
from padbench.server.db.models import GangMember, Job, JobAttempt, JobResult, Worker


@dataclass(frozen=True)
class JobRow:
    job: Job
    worker_name: str | None
    worker_capabilities: dict[str, Any] | None = None  # as the job's worker registered them


def _jobs_with_worker_names() -> Select[Job, str | None, dict[str, Any] | None]:
    # populate_existing: a job loaded earlier in this session may predate a queue UPDATE made since.
    return (
        select(Job, Worker.name, Worker.capabilities).outerjoin(Worker, Job.worker_id == Worker.id)
        .execution_options(populate_existing=True)
    )


def find_job(session: Session, job_id: int, *, submitter: str | None) -> JobRow | None:
    """The job, or None when it does not exist or (with `submitter`) belongs to someone else."""
    statement = _jobs_with_worker_names().where(Job.id == job_id)
    if submitter is not None:
        statement = statement.where(Job.submitter == submitter)
    row = session.execute(statement).one_or_none()
    return None if row is None else JobRow(*row)


def list_jobs(
    session: Session, *, submitter: str | None, status: str | None, limit: int, offset: int
) -> tuple[list[JobRow], int]:
    """One page of jobs, newest first, and the total number matching the filters."""
    filters = []
    if submitter is not None:
        filters.append(Job.submitter == submitter)
    if status is not None:
        filters.append(Job.status == status)
    total = session.scalar(select(func.count()).select_from(Job).where(*filters)) or 0
    rows = session.execute(
        # The spec can be large and a page does not show it, so it is never loaded here.
        _jobs_with_worker_names().options(defer(Job.spec, raiseload=True))
        .where(*filters).order_by(Job.id.desc()).limit(limit).offset(offset)
    ).all()
    return [JobRow(*row) for row in rows], total


def find_submitted_job(session: Session, *, submitter: str, idempotency_key: str) -> Job | None:
    """The submitter's job created under `idempotency_key`, if any."""
    return session.scalar(
        select(Job).where(Job.submitter == submitter, Job.idempotency_key == idempotency_key)
        .execution_options(populate_existing=True)
    )


def find_result(session: Session, job_id: int) -> dict[str, Any] | None:
    return session.scalar(select(JobResult.result).where(JobResult.job_id == job_id))


def recent_results(session: Session, *, submitter: str | None, kind: str | None,
                   limit: int) -> list[tuple[int, dict[str, Any]]]:
    """The newest `limit` stored results (of `kind`, of `submitter`'s jobs when given), newest first."""
    statement = select(JobResult.job_id, JobResult.result).join(Job, Job.id == JobResult.job_id)
    if submitter is not None:
        statement = statement.where(Job.submitter == submitter)
    if kind is not None:
        statement = statement.where(Job.kind == kind)
    rows = session.execute(statement.order_by(JobResult.job_id.desc()).limit(limit)).all()
    return [(job_id, result) for job_id, result in rows]


def find_result_lease(session: Session, job_id: int) -> str | None:
    """The lease whose report the job's stored result is; None without a result (or from before leases were kept)."""
    return session.scalar(select(JobResult.lease_token).where(JobResult.job_id == job_id))


def find_lease_worker(session: Session, job_id: int, lease_token: str) -> int | None:
    """The worker that `lease_token`, one of the job's leases (any attempt's), was granted to; None when it is
    none of the job's leases."""
    recorded = select(JobAttempt.worker_id).where(JobAttempt.job_id == job_id, JobAttempt.lease_token == lease_token)
    current = select(Job.worker_id).where(Job.id == job_id, Job.lease_token == lease_token)
    return session.scalar(recorded) or session.scalar(current)


def find_worker(session: Session, worker_id: int) -> Worker | None:
    return session.get(Worker, worker_id)


def find_worker_by_name(session: Session, name: str) -> Worker | None:
    return session.scalar(select(Worker).where(Worker.name == name))


@dataclass(frozen=True)
class RunningJob:
    id: int
    gpus: int  # as jobs.gpus holds it (ALL_GPUS: all of the worker's)


@dataclass(frozen=True)
class WorkerRow:
    worker: Worker
    running: tuple[RunningJob, ...] = ()  # oldest first

    @property
    def running_job_id(self) -> int | None:
        return self.running[-1].id if self.running else None


def list_workers(session: Session) -> list[WorkerRow]:
    """Every registered worker, oldest first, with the jobs it runs now: those whose lease it holds, and those
    whose running attempt it is a gang member of (node 0, the lease's holder, counted once)."""
    running: dict[int, list[RunningJob]] = {}
    for worker_id, job_id, gpus in session.execute(_running_jobs_by_worker()):
        if worker_id is not None:  # always, by the filters; the columns themselves may hold NULL
            running.setdefault(worker_id, []).append(RunningJob(job_id, gpus))
    workers = session.scalars(select(Worker).order_by(Worker.id))
    return [WorkerRow(worker, tuple(running.get(worker.id, ()))) for worker in workers]


def _running_jobs_by_worker() -> CompoundSelect[int | None, int, int]:
    """(worker, job, the job's GPUs per node) for each running job and each worker that runs it: the lease's
    holder, and every member of a gang running the job's current attempt (one per node, each holding `gpus`
    GPUs of its own). UNION, not UNION ALL: node 0 is both the lease's holder and a member."""
    running = Job.status == JobStatus.running.value
    held = select(Job.worker_id, Job.id.label("job_id"), Job.gpus).where(running, Job.worker_id.is_not(None))
    member_of_running_attempt = and_(GangMember.job_id == Job.id, GangMember.attempt_token == Job.lease_token)
    membered = (select(GangMember.worker_id, Job.id.label("job_id"), Job.gpus).join(Job, member_of_running_attempt)
                .where(running, GangMember.worker_id.is_not(None)))
    return union(held, membered).order_by("job_id")


def live_workers(session: Session, *, within_seconds: float) -> list[Capabilities]:
    """The capabilities of each worker that was in contact in the last `within_seconds` (by the database's clock)."""
    documents = session.scalars(select(Worker.capabilities).where(Worker.last_contact_at >= db_now(-within_seconds)))
    return [Capabilities.model_validate(document) for document in documents]


@dataclass(frozen=True)
class GangMemberRow:
    node_rank: int
    worker_name: str
    address: str
    port: int


def gang_members(session: Session, job_id: int, attempt_token: str | None) -> list[GangMemberRow]:
    """The members of job `job_id`'s gang running attempt `attempt_token` (None: its forming gang), by node rank."""
    attempt = GangMember.attempt_token.is_(None) if attempt_token is None else GangMember.attempt_token == attempt_token
    rows = session.execute(
        select(GangMember.node_rank, Worker.name, GangMember.address, GangMember.port)
        .join(Worker, GangMember.worker_id == Worker.id)
        .where(GangMember.job_id == job_id, attempt).order_by(GangMember.node_rank)
    )
    return [GangMemberRow(rank, name, address, port) for rank, name, address, port in rows]


def find_member_worker(session: Session, member_token: str) -> int | None:
    """The worker a gang membership was granted to (None: no such membership)."""
    return session.scalar(select(GangMember.worker_id).where(GangMember.member_token == member_token))


def member_expiry(session: Session, member_token: str) -> datetime:
    return session.execute(select(GangMember.expires_at).where(GangMember.member_token == member_token)).scalar_one()


def member_attempt(session: Session, member_token: str, job_id: int) -> str | None:
    """The attempt (its lease token) a member of job `job_id`'s gang belongs to; None for a forming gang's
    member or no such member."""
    return session.scalar(select(GangMember.attempt_token).where(GangMember.member_token == member_token,
                                                                 GangMember.job_id == job_id))
