"""One job, whole: submit, claim, cancel request, reap and prune. What a lease's holder does with it
(heartbeat, resume, report, release) is in `leases.py`; a job a gang of workers holds together, in `gangs.py`.

The rules every statement keeps are in the package's docstring (`padbench.server.queue`).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, exists, insert, or_, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from padbench.server.db.clock import db_now
from padbench.server.db.models import ALL_GPUS, HELD_BY_WORKER, Job, JobAttempt, JobRequirement
from padbench.server.queue.fences import (
    CANCELLED,
    FAILED,
    FINISHED,
    LEASE_EXPIRED_ERROR,
    PLAIN_UPDATE,
    QUEUED,
    RUNNING,
    rowcount,
)

SECONDS_PER_DAY = 24 * 3600


def insert_job(
    session: Session,
    *,
    kind: str,
    name: str | None,
    spec: dict[str, Any],
    submitter: str,
    max_attempts: int,
    requirements: Collection[str],
    gpus: int = 1,
    nodes: int = 1,
    idempotency_key: str | None = None,
) -> int | None:
    """A new queued job and the capabilities a worker needs to claim it; `gpus` is how many it runs on
    (ALL_GPUS: all of the worker's), on each of `nodes` nodes.

    None (nothing inserted) when the submitter already used `idempotency_key`: the caller reads that job.
    Without a key the job is always new.
    """
    # Each dialect has its own ON CONFLICT construct; both render the same SQL here.
    insert_unless_known = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    job_id: int | None = session.execute(
        insert_unless_known(Job)
        .values(kind=kind, name=name, spec=spec, status=QUEUED, submitter=submitter, attempts=0,
                max_attempts=max_attempts, cancel_requested=False, created_at=db_now(), gpus=gpus,
                nodes=nodes, idempotency_key=idempotency_key)
        .on_conflict_do_nothing(index_elements=[Job.submitter, Job.idempotency_key])
        .returning(Job.id)
    ).scalar_one_or_none()
    if job_id is not None:
        session.execute(insert(JobRequirement), [{"job_id": job_id, "capability": c} for c in sorted(requirements)])
    return job_id


def queued_gpu_requirements(session: Session) -> list[str]:
    """The distinct `gpu:` requirements of queued jobs: what a claiming worker's GPU name is matched against."""
    return list(session.scalars(
        select(JobRequirement.capability).distinct()
        .join(Job, Job.id == JobRequirement.job_id)
        .where(Job.status == QUEUED, JobRequirement.capability.startswith("gpu:", autoescape=True))
    ))


def fits_free_gpus(candidate: type[Job], owned: int, free: int) -> ColumnElement[bool]:
    """The job needs no more GPUs than the worker has free; any job fits a worker without GPUs (it runs one
    job at a time, and the requirements keep multi-GPU jobs off it unless their ranks run on its CPU)."""
    if owned == 0:
        return true()
    needed = case((candidate.gpus == ALL_GPUS, owned), else_=candidate.gpus)
    return needed <= free


def claim_next_job(
    session: Session, *, worker_id: int, offered: Collection[str], lease_seconds: float,
    gpus_owned: int = 0, gpus_free: int = 0, max_nodes: int = 1,
) -> Job | None:
    """Lease the oldest queued job none of whose requirements the worker lacks, that fits the worker's
    `gpus_free` GPUs (of `gpus_owned`) on each node and runs on no more than `max_nodes` nodes; None when
    there is none.

    A plain worker (`max_nodes` 1) claims only one-node jobs and joins gangs for the others. A worker that
    hands its jobs to a scheduler claims a job across up to `max_nodes` nodes whole: its attempt is one
    worker's (HELD_BY_WORKER), and the scheduler places the nodes.
    """
    candidate = aliased(Job, name="candidate")
    lacks_requirement = exists().where(
        JobRequirement.job_id == candidate.id, JobRequirement.capability.not_in(sorted(offered))
    )
    next_job_id = (
        select(candidate.id)
        .where(candidate.status == QUEUED, candidate.nodes <= max_nodes, ~lacks_requirement,
               fits_free_gpus(candidate, gpus_owned, gpus_free))
        .order_by(candidate.id)
        .limit(1)
        .with_for_update(skip_locked=True)  # PostgreSQL: concurrent claimers skip each other's row
        .scalar_subquery()
    )
    statement = (
        update(Job)
        .where(Job.id == next_job_id, Job.status == QUEUED)
        .values(status=RUNNING, attempts=Job.attempts + 1, worker_id=worker_id,
                lease_token=secrets.token_urlsafe(24), lease_expires_at=db_now(lease_seconds),
                started_at=db_now(), progress=None, progress_message=None)
        .returning(Job)
        .execution_options(**PLAIN_UPDATE)
    )
    job = session.scalars(statement).one_or_none()
    if job is not None:
        session.execute(insert(JobAttempt).values(lease_token=job.lease_token, job_id=job.id, worker_id=worker_id,
                                                  claimed_at=db_now(), held_by=HELD_BY_WORKER))
    return job


def request_cancel(session: Session, job_id: int, *, submitter: str | None) -> str | None:
    """Queued → cancelled at once; running → cancel_requested (the worker learns on its next heartbeat).

    `submitter` limits the change to that submitter's jobs (None: any job, for admins). Returns the new
    status, or None when no unfinished job matched.
    """
    was_queued = Job.status == QUEUED
    statement = (
        update(Job)
        .where(Job.id == job_id, Job.status.in_((QUEUED, RUNNING)))
        .values(status=case((was_queued, CANCELLED), else_=Job.status), cancel_requested=True,
                finished_at=case((was_queued, db_now()), else_=Job.finished_at))
        .returning(Job.status)
        .execution_options(**PLAIN_UPDATE)
    )
    if submitter is not None:
        statement = statement.where(Job.submitter == submitter)
    return session.execute(statement).scalar_one_or_none()


def requeue_expired_leases(session: Session, *, grace_seconds: float) -> int:
    """The reaper: running jobs whose lease expired more than `grace_seconds` ago go back to the queue, or
    end when they cannot continue.

    Cancel requested → cancelled; attempts spent → failed; otherwise → queued for another worker.
    Returns how many jobs it moved.
    """
    statement = (
        update(Job)
        .where(Job.status == RUNNING, Job.lease_expires_at <= db_now(-grace_seconds))
        .values(**reaped_values())
        .execution_options(**PLAIN_UPDATE)
    )
    return rowcount(session, statement)


def reaped_values() -> dict[str, Any]:
    """What the reaper sets on a running job it takes away: cancel requested → cancelled; attempts spent →
    failed; otherwise → queued for another worker (or gang)."""
    attempts_spent = Job.attempts >= Job.max_attempts
    ends = or_(Job.cancel_requested, attempts_spent)
    return dict(status=case((Job.cancel_requested, CANCELLED), (attempts_spent, FAILED), else_=QUEUED),
                error=case((and_(attempts_spent, ~Job.cancel_requested), LEASE_EXPIRED_ERROR), else_=Job.error),
                finished_at=case((ends, db_now()), else_=None),
                worker_id=case((ends, Job.worker_id), else_=None),
                lease_token=None, lease_expires_at=None)


def delete_finished_jobs(session: Session, *, older_than_days: int) -> int:
    """Retention: remove jobs that finished (succeeded, failed, cancelled) more than `older_than_days` ago.

    Their results, requirements and attempts go with them (the foreign keys cascade). Queued and running
    jobs are never removed, however old. Returns how many jobs were removed.
    """
    statement = (
        delete(Job)
        .where(Job.status.in_(FINISHED), Job.finished_at < db_now(-older_than_days * SECONDS_PER_DAY))
        .execution_options(**PLAIN_UPDATE)
    )
    return rowcount(session, statement)
