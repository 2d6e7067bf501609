"""The job queue. EVERY job state change is one named, single-statement SQL UPDATE in this module.

Rules the statements keep (after procrastinate and Oban):
- Time comes from the database clock (`db_now`), never from Python's.
- A claim is one atomic `UPDATE … WHERE id = (SELECT … LIMIT 1 [FOR UPDATE SKIP LOCKED]) RETURNING …`;
  attempts are counted at claim time, so a job that crashes its worker every time runs out of attempts.
- Everything a lease holder does is fenced by the lease token AND an unexpired deadline: a worker whose
  lease expired (and perhaps went to someone else) changes nothing; its caller answers 409.
- The reaper is one idempotent UPDATE; running it twice changes nothing the second time.
- A submit with an idempotency key is one `INSERT … ON CONFLICT DO NOTHING`: two racing retries of the same
  submit cannot both create a job, and neither needs an error (which would abort a PostgreSQL transaction).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    CursorResult,
    Delete,
    Update,
    and_,
    case,
    delete,
    exists,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from padbench.contract.api import JobStatus
from padbench.server.db.clock import db_now
from padbench.server.db.models import Job, JobRequirement, JobResult

QUEUED, RUNNING = JobStatus.queued.value, JobStatus.running.value
SUCCEEDED, FAILED, CANCELLED = JobStatus.succeeded.value, JobStatus.failed.value, JobStatus.cancelled.value
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
SECONDS_PER_DAY = 24 * 3600
LEASE_EXPIRED_ERROR = "the worker's lease expired on its last attempt (no attempts left)"
# ORM UPDATEs here are plain statements: no in-Python evaluation of which loaded objects they touched.
PLAIN_UPDATE = {"synchronize_session": False}


@dataclass(frozen=True)
class LeaseExtension:
    cancel_requested: bool
    lease_expires_at: datetime


def _holds_lease(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """The fencing condition: the job is running under exactly this lease, and the lease has not expired."""
    return and_(
        Job.id == job_id,
        Job.status == RUNNING,
        Job.lease_token == lease_token,
        Job.lease_expires_at > db_now(),
    )


def insert_job(
    session: Session,
    *,
    kind: str,
    name: str | None,
    spec: dict[str, Any],
    submitter: str,
    max_attempts: int,
    requirements: Collection[str],
    idempotency_key: str | None = None,
) -> int | None:
    """A new queued job and the capabilities a worker needs to claim it.

    None (nothing inserted) when the submitter already used `idempotency_key`: the caller reads that job.
    Without a key the job is always new.
    """
    # Each dialect has its own ON CONFLICT construct; both render the same SQL here.
    insert_unless_known = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    job_id: int | None = session.execute(
        insert_unless_known(Job)
        .values(kind=kind, name=name, spec=spec, status=QUEUED, submitter=submitter, attempts=0,
                max_attempts=max_attempts, cancel_requested=False, created_at=db_now(),
                idempotency_key=idempotency_key)
        .on_conflict_do_nothing(index_elements=[Job.submitter, Job.idempotency_key])
        .returning(Job.id)
    ).scalar_one_or_none()
    if job_id is not None:
        session.execute(insert(JobRequirement), [{"job_id": job_id, "capability": c} for c in sorted(requirements)])
    return job_id


def claim_next_job(session: Session, *, worker_id: int, offered: Collection[str], lease_seconds: float) -> Job | None:
    """Lease the oldest queued job none of whose requirements the worker lacks; None when there is none."""
    candidate = aliased(Job, name="candidate")
    lacks_requirement = exists().where(
        JobRequirement.job_id == candidate.id, JobRequirement.capability.not_in(sorted(offered))
    )
    next_job_id = (
        select(candidate.id)
        .where(candidate.status == QUEUED, ~lacks_requirement)
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
    return session.scalars(statement).one_or_none()


def extend_lease(
    session: Session, job_id: int, lease_token: str, *, lease_seconds: float,
    progress: float | None, message: str | None,
) -> LeaseExtension | None:
    """A heartbeat: push the deadline out and record progress. None when the lease is not (or no longer) held."""
    values: dict[str, Any] = {"lease_expires_at": db_now(lease_seconds)}
    if progress is not None:
        values["progress"] = progress
    if message is not None:
        values["progress_message"] = message
    row = session.execute(
        update(Job).where(_holds_lease(job_id, lease_token)).values(**values)
        .returning(Job.cancel_requested, Job.lease_expires_at).execution_options(**PLAIN_UPDATE)
    ).one_or_none()
    return None if row is None else LeaseExtension(bool(row.cancel_requested), row.lease_expires_at)


def complete_job(session: Session, job_id: int, lease_token: str, result: dict[str, Any]) -> bool:
    """Mark the job succeeded and store its result; False (nothing stored) when the lease is not held."""
    finished = (update(Job).where(_holds_lease(job_id, lease_token))
                .values(status=SUCCEEDED, progress=1.0, finished_at=db_now(), lease_token=None, lease_expires_at=None))
    return _end_with_result(session, job_id, finished, result)


def cancel_with_partial_result(session: Session, job_id: int, lease_token: str, error: str,
                               result: dict[str, Any]) -> bool:
    """End a job whose cancel was requested as `cancelled`, keeping the rows it finished (`result`, marked
    partial). False (nothing stored) unless the lease is held and the cancel was requested.

    The lease is cleared in the same statement, so the rows are accepted once, and only from the worker
    that ran them; a job that ends here can never become `succeeded`.
    """
    cancelled = (update(Job).where(_holds_lease(job_id, lease_token), Job.cancel_requested)
                 .values(status=CANCELLED, error=error, finished_at=db_now(), lease_token=None, lease_expires_at=None))
    return _end_with_result(session, job_id, cancelled, result)


def _end_with_result(session: Session, job_id: int, ending: Update, result: dict[str, Any]) -> bool:
    """Run `ending` (the fenced UPDATE that ends the job) and, only when it matched, store `result` for the job."""
    if session.execute(ending.returning(Job.id).execution_options(**PLAIN_UPDATE)).first() is None:
        return False
    session.execute(insert(JobResult).values(job_id=job_id, result=result, created_at=db_now()))
    return True


def fail_job(session: Session, job_id: int, lease_token: str, error: str, traceback: str | None) -> bool:
    """Record the job's error. A job whose cancel was requested ends `cancelled` rather than `failed`."""
    statement = (
        update(Job).where(_holds_lease(job_id, lease_token))
        .values(status=case((Job.cancel_requested, CANCELLED), else_=FAILED), error=error, traceback=traceback,
                finished_at=db_now(), lease_token=None, lease_expires_at=None)
        .execution_options(**PLAIN_UPDATE)
    )
    return _rowcount(session, statement) == 1


def release_job(session: Session, job_id: int, lease_token: str) -> bool:
    """The worker gives the job back unfinished (it is shutting down): queued again, attempt returned.

    Giving the attempt back is deliberate: a graceful shutdown is not the job's fault. A job whose cancel
    was requested ends `cancelled` instead of going back to the queue.
    """
    statement = (
        update(Job).where(_holds_lease(job_id, lease_token))
        .values(status=case((Job.cancel_requested, CANCELLED), else_=QUEUED),
                attempts=Job.attempts - 1,
                finished_at=case((Job.cancel_requested, db_now()), else_=None),
                worker_id=case((Job.cancel_requested, Job.worker_id), else_=None),
                lease_token=None, lease_expires_at=None, progress=None, progress_message=None)
        .execution_options(**PLAIN_UPDATE)
    )
    return _rowcount(session, statement) == 1


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


def requeue_expired_leases(session: Session) -> int:
    """The reaper: running jobs whose lease expired go back to the queue, or end when they cannot continue.

    Cancel requested → cancelled; attempts spent → failed; otherwise → queued for another worker.
    Returns how many jobs it moved.
    """
    attempts_spent = Job.attempts >= Job.max_attempts
    ends = or_(Job.cancel_requested, attempts_spent)
    statement = (
        update(Job)
        .where(Job.status == RUNNING, Job.lease_expires_at <= db_now())
        .values(status=case((Job.cancel_requested, CANCELLED), (attempts_spent, FAILED), else_=QUEUED),
                error=case((and_(attempts_spent, ~Job.cancel_requested), LEASE_EXPIRED_ERROR), else_=Job.error),
                finished_at=case((ends, db_now()), else_=None),
                worker_id=case((ends, Job.worker_id), else_=None),
                lease_token=None, lease_expires_at=None)
        .execution_options(**PLAIN_UPDATE)
    )
    return _rowcount(session, statement)


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
    return _rowcount(session, statement)


def _rowcount(session: Session, statement: Update | Delete) -> int:
    # An UPDATE or DELETE always yields a CursorResult; Session.execute's stubs only promise the Result base class.
    return cast(CursorResult[Any], session.execute(statement)).rowcount
