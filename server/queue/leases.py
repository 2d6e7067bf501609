"""What the holder of a job's lease does with it: heartbeat, resume, report a result or a failure, stop on a
cancel, release. Its holder is one worker, or node 0 of a gang (`gangs.py`) for the lease itself.

The rules every statement keeps are in the package's docstring (`padbench.server.queue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Update, and_, case, delete, exists, insert, null, update
from sqlalchemy.orm import Session, aliased

from padbench.server.db.clock import db_now
from padbench.server.db.models import HELD_BY_WORKER, Job, JobAttempt, JobResult
from padbench.server.queue.fences import (
    AWAITS_RESULT,
    CANCELLED,
    FAILED,
    PLAIN_UPDATE,
    QUEUED,
    REAPED,
    RUNNING,
    SUCCEEDED,
    attempt_worker,
    held_by_gang,
    holds_lease,
    is_attempt,
    is_lease,
    rowcount,
)


@dataclass(frozen=True)
class LeaseExtension:
    cancel_requested: bool
    lease_expires_at: datetime


def progress_values(progress: float | None, message: str | None) -> dict[str, Any]:
    """Only what the beat carries: a beat without progress keeps the last progress shown (a gang member's beat
    carries the job's progress too, `gangs.record_member_progress`)."""
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
    return _extension(session, update(Job).where(is_lease(job_id, lease_token))
                      .values(lease_expires_at=db_now(lease_seconds), **progress_values(progress, message)))


def resume_lease(
    session: Session, job_id: int, lease_token: str, *, lease_seconds: float,
    progress: float | None, message: str | None,
) -> LeaseExtension | None:
    """A heartbeat from the job's latest attempt after the reaper took its lease away (requeued, or failed
    with no attempt left) and before anyone claimed the job again: the job runs on under the same lease,
    so it is not run twice. The attempt was counted when it was claimed and is not counted again.

    The reaper acts on missed heartbeats alone (an overloaded server, a network outage); a worker that is
    still beating is still running the job. Only one worker's attempt is resumed (a job across nodes claimed
    whole included), never a gang's: the reaper took it because a member was lost, and the other members have
    stopped. None when the lease cannot be resumed.
    """
    mine, other = aliased(JobAttempt, name="mine"), aliased(JobAttempt, name="other")
    claimed_later = exists().where(other.job_id == job_id, other.claimed_at > mine.claimed_at)
    is_latest_attempt = exists().where(mine.job_id == job_id, mine.lease_token == lease_token,
                                       mine.held_by == HELD_BY_WORKER, ~claimed_later)
    statement = (
        update(Job).where(Job.id == job_id, REAPED, is_latest_attempt)
        .values(status=RUNNING, worker_id=attempt_worker(lease_token), lease_token=lease_token,
                lease_expires_at=db_now(lease_seconds), error=None, finished_at=None,
                **progress_values(progress, message))
    )
    return _extension(session, statement)


def complete_job(session: Session, job_id: int, lease_token: str, result: dict[str, Any]) -> bool:
    """Mark the job succeeded and store its result, reported under any of its attempts' leases; False
    (nothing stored) when the lease is none of the job's or the job has a result or ended otherwise.

    The first result wins: the status condition lets exactly one report through. The job is then the
    reporting attempt's, and the current lease (another worker's, perhaps) is cleared, so that worker's
    next heartbeat is refused and it stops its run.
    """
    finished = (update(Job).where(Job.id == job_id, AWAITS_RESULT, is_attempt(job_id, lease_token))
                .values(status=SUCCEEDED, progress=1.0, error=None, finished_at=db_now(),
                        worker_id=attempt_worker(lease_token), lease_token=None, lease_expires_at=None))
    return _end_with_result(session, job_id, lease_token, finished, result)


def cancel_with_partial_result(session: Session, job_id: int, lease_token: str, error: str,
                               result: dict[str, Any]) -> bool:
    """End a job whose cancel was requested as `cancelled`, keeping the rows it finished (`result`, marked
    partial). False (nothing stored) unless the lease is held and the cancel was requested.

    The lease is cleared in the same statement, so the rows are accepted once, and only from the worker
    that ran them; a job that ends here can never become `succeeded`.
    """
    cancelled = (update(Job).where(holds_lease(job_id, lease_token), Job.cancel_requested)
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

    A gang's attempt (several workers, one per node) goes back to the queue while it has attempts left: across
    the gang's hosts a failure is as often one host's (a node lost, a link down) as the job's, and every
    member's ranks fail together when one member's do. Its error stays on the job until an attempt ends it.
    A job across nodes claimed whole by one worker fails as a one-node job does: its scheduler placed the
    nodes and reported how the job ended.
    """
    requeued = and_(held_by_gang(), ~Job.cancel_requested, Job.attempts < Job.max_attempts)
    statement = (
        update(Job).where(holds_lease(job_id, lease_token))
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
        update(Job).where(holds_lease(job_id, lease_token))
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
