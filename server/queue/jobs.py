"""One job on one worker: submit, claim, heartbeat, resume, report, release, cancel, reap and prune.

The rules every statement keeps are in the package's docstring (`padbench.server.queue`).
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
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from padbench.contract.api import JobStatus
from padbench.server.db.clock import db_now
from padbench.server.db.models import ALL_GPUS, Job, JobAttempt, JobRequirement, JobResult

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


def _is_lease(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """The job runs under exactly this lease, whatever its deadline: the reaper clears the token when it acts."""
    return and_(Job.id == job_id, Job.status == RUNNING, Job.lease_token == lease_token)


def _holds_lease(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """The fencing condition: the job is running under exactly this lease, and the lease has not expired."""
    return and_(_is_lease(job_id, lease_token), Job.lease_expires_at > db_now())


def _is_attempt(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """`lease_token` is one of the job's leases: the current one, or any attempt recorded for the job."""
    recorded = exists().where(JobAttempt.job_id == job_id, JobAttempt.lease_token == lease_token)
    return or_(Job.lease_token == lease_token, recorded)


def _attempt_worker(lease_token: str) -> ColumnElement[Any]:
    """The worker the lease `lease_token` was granted to (the job's own worker while that lease is current)."""
    granted = select(JobAttempt.worker_id).where(JobAttempt.lease_token == lease_token).scalar_subquery()
    return case((Job.lease_token == lease_token, Job.worker_id), else_=granted)


# Taken off its worker by the reaper for missed heartbeats alone: requeued, or failed with no attempt left.
_REAPED = or_(Job.status == QUEUED, and_(Job.status == FAILED, Job.error == LEASE_EXPIRED_ERROR))
# Still without a result and not ended by anyone's decision: a result from any attempt is welcome.
_AWAITS_RESULT = or_(Job.status == RUNNING, _REAPED)


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
    (ALL_GPUS: all of the worker's), on each of `nodes` workers.

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
    gpus_owned: int = 0, gpus_free: int = 0,
) -> Job | None:
    """Lease the oldest queued job none of whose requirements the worker lacks and that fits the worker's
    `gpus_free` GPUs (of `gpus_owned`); None when there is none."""
    candidate = aliased(Job, name="candidate")
    lacks_requirement = exists().where(
        JobRequirement.job_id == candidate.id, JobRequirement.capability.not_in(sorted(offered))
    )
    next_job_id = (
        select(candidate.id)
        .where(candidate.status == QUEUED, candidate.nodes == 1, ~lacks_requirement,
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
                                                  claimed_at=db_now()))
    return job


def _progress_values(progress: float | None, message: str | None) -> dict[str, Any]:
    """Only what the heartbeat carries: a beat without progress keeps the last progress shown."""
    given = {"progress": progress, "progress_message": message}
    return {column: value for column, value in given.items() if value is not None}


def _extension(session: Session, statement: Update) -> LeaseExtension | None:
    row = session.execute(
        statement.returning(Job.cancel_requested, Job.lease_expires_at).execution_options(**PLAIN_UPDATE)
    ).one_or_none()
    return None if row is None else LeaseExtension(bool(row.cancel_requested), row.lease_expires_at)


def extend_lease(
    session: Session, job_id: int, lease_token: str, *, lease_seconds: float,
    progress: float | None, message: str | None,
) -> LeaseExtension | None:
    """A heartbeat: push the deadline out and record progress. None when the job does not run under this lease.

    A deadline that passed is extended too while the reaper has not acted: nobody else can hold the job then.
    """
    return _extension(session, update(Job).where(_is_lease(job_id, lease_token))
                      .values(lease_expires_at=db_now(lease_seconds), **_progress_values(progress, message)))


def resume_lease(
    session: Session, job_id: int, lease_token: str, *, lease_seconds: float,
    progress: float | None, message: str | None,
) -> LeaseExtension | None:
    """A heartbeat from the job's latest attempt after the reaper took its lease away (requeued, or failed
    with no attempt left) and before anyone claimed the job again: the job runs on under the same lease,
    so it is not run twice. The attempt was counted when it was claimed and is not counted again.

    The reaper acts on missed heartbeats alone (an overloaded server, a network outage); a worker that is
    still beating is still running the job. A gang's attempt is never resumed: the reaper took it because a
    member was lost, and the other members have stopped. None when the lease cannot be resumed.
    """
    mine, other = aliased(JobAttempt, name="mine"), aliased(JobAttempt, name="other")
    claimed_later = exists().where(other.job_id == job_id, other.claimed_at > mine.claimed_at)
    is_latest_attempt = exists().where(mine.job_id == job_id, mine.lease_token == lease_token, ~claimed_later)
    statement = (
        update(Job).where(Job.id == job_id, Job.nodes == 1, _REAPED, is_latest_attempt)
        .values(status=RUNNING, worker_id=_attempt_worker(lease_token), lease_token=lease_token,
                lease_expires_at=db_now(lease_seconds), error=None, finished_at=None,
                **_progress_values(progress, message))
    )
    return _extension(session, statement)


def complete_job(session: Session, job_id: int, lease_token: str, result: dict[str, Any]) -> bool:
    """Mark the job succeeded and store its result, reported under any of its attempts' leases; False
    (nothing stored) when the lease is none of the job's or the job has a result or ended otherwise.

    The first result wins: the status condition lets exactly one report through. The job is then the
    reporting attempt's, and the current lease (another worker's, perhaps) is cleared, so that worker's
    next heartbeat is refused and it stops its run.
    """
    finished = (update(Job).where(Job.id == job_id, _AWAITS_RESULT, _is_attempt(job_id, lease_token))
                .values(status=SUCCEEDED, progress=1.0, error=None, finished_at=db_now(),
                        worker_id=_attempt_worker(lease_token), lease_token=None, lease_expires_at=None))
    return _end_with_result(session, job_id, lease_token, finished, result)


def cancel_with_partial_result(session: Session, job_id: int, lease_token: str, error: str,
                               result: dict[str, Any]) -> bool:
    """End a job whose cancel was requested as `cancelled`, keeping the rows it finished (`result`, marked
    partial). False (nothing stored) unless the lease is held and the cancel was requested.

    The lease is cleared in the same statement, so the rows are accepted once, and only from the worker
    that ran them; a job that ends here can never become `succeeded`.
    """
    cancelled = (update(Job).where(_holds_lease(job_id, lease_token), Job.cancel_requested)
                 .values(status=CANCELLED, error=error, finished_at=db_now(), lease_token=None, lease_expires_at=None))
    return _end_with_result(session, job_id, lease_token, cancelled, result)


def _end_with_result(session: Session, job_id: int, lease_token: str, ending: Update, result: dict[str, Any]) -> bool:
    """Run `ending` (the fenced UPDATE that ends the job) and, only when it matched, store `result` for the
    job with the lease that reported it."""
    if session.execute(ending.returning(Job.id).execution_options(**PLAIN_UPDATE)).first() is None:
        return False
    session.execute(insert(JobResult).values(job_id=job_id, result=result, lease_token=lease_token,
                                             created_at=db_now()))
    return True


def fail_job(session: Session, job_id: int, lease_token: str, error: str, traceback: str | None) -> bool:
    """Record the job's error. A job whose cancel was requested ends `cancelled` rather than `failed`.

    A gang's attempt (a job across several workers) goes back to the queue while it has attempts left: across
    hosts a failure is as often one host's (a node lost, a link down) as the job's, and every member's ranks
    fail together when one member's do. Its error stays on the job until an attempt ends it.
    """
    requeued = and_(Job.nodes > 1, ~Job.cancel_requested, Job.attempts < Job.max_attempts)
    statement = (
        update(Job).where(_holds_lease(job_id, lease_token))
        .values(status=case((Job.cancel_requested, CANCELLED), (requeued, QUEUED), else_=FAILED), error=error,
                traceback=traceback, finished_at=case((requeued, null()), else_=db_now()),
                worker_id=case((requeued, null()), else_=Job.worker_id), lease_token=None, lease_expires_at=None)
        .execution_options(**PLAIN_UPDATE)
    )
    return rowcount(session, statement) == 1


def release_job(session: Session, job_id: int, lease_token: str) -> bool:
    """The worker gives the job back unfinished (it is shutting down): queued again, attempt returned.

    Giving the attempt back is deliberate: a graceful shutdown is not the job's fault. Its record goes
    with it, so the released lease can neither resume the job nor report for it. A job whose cancel was
    requested ends `cancelled` instead of going back to the queue.
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
    if rowcount(session, statement) != 1:
        return False
    session.execute(delete(JobAttempt).where(JobAttempt.lease_token == lease_token))
    return True


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


def rowcount(session: Session, statement: Update | Delete) -> int:
    # An UPDATE or DELETE always yields a CursorResult; Session.execute's stubs only promise the Result base class.
    return cast(CursorResult[Any], session.execute(statement)).rowcount
