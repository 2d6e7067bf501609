"""What the queue's statements share: the job states, the fencing conditions and the plain-UPDATE options.

The rules every statement keeps are in the package's docstring (`padbench.server.queue`).
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Delete, Update, and_, case, exists, or_, select
from sqlalchemy.orm import Session

from padbench.contract.api import JobStatus
from padbench.server.db.clock import db_now
from padbench.server.db.models import HELD_BY_GANG, Job, JobAttempt

QUEUED, RUNNING = JobStatus.queued.value, JobStatus.running.value
SUCCEEDED, FAILED, CANCELLED = JobStatus.succeeded.value, JobStatus.failed.value, JobStatus.cancelled.value
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
LEASE_EXPIRED_ERROR = "the worker's lease expired on its last attempt (no attempts left)"
# ORM UPDATEs here are plain statements: no in-Python evaluation of which loaded objects they touched.
PLAIN_UPDATE = {"synchronize_session": False}


def is_lease(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """The job runs under exactly this lease, whatever its deadline: the reaper clears the token when it acts."""
    return and_(Job.id == job_id, Job.status == RUNNING, Job.lease_token == lease_token)


def holds_lease(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """The fencing condition: the job is running under exactly this lease, and the lease has not expired."""
    return and_(is_lease(job_id, lease_token), Job.lease_expires_at > db_now())


def is_attempt(job_id: int, lease_token: str) -> ColumnElement[bool]:
    """`lease_token` is one of the job's leases: the current one, or any attempt recorded for the job."""
    recorded = exists().where(JobAttempt.job_id == job_id, JobAttempt.lease_token == lease_token)
    return or_(Job.lease_token == lease_token, recorded)


def attempt_worker(lease_token: str) -> ColumnElement[Any]:
    """The worker the lease `lease_token` was granted to (the job's own worker while that lease is current)."""
    granted = select(JobAttempt.worker_id).where(JobAttempt.lease_token == lease_token).scalar_subquery()
    return case((Job.lease_token == lease_token, Job.worker_id), else_=granted)


def held_by_gang() -> ColumnElement[bool]:
    """The job's current attempt is a gang's (several workers, one per node), not one worker's: only a gang's
    attempt has members to lose, and only a gang's failure is requeued as a lost host's. A job across nodes
    claimed whole by a worker that hands it to a scheduler is one worker's, like any one-node job."""
    return exists().where(JobAttempt.lease_token == Job.lease_token, JobAttempt.held_by == HELD_BY_GANG)


# Taken off its worker by the reaper for missed heartbeats alone: requeued, or failed with no attempt left.
REAPED = or_(Job.status == QUEUED, and_(Job.status == FAILED, Job.error == LEASE_EXPIRED_ERROR))
# Still without a result and not ended by anyone's decision: a result from any attempt is welcome.
AWAITS_RESULT = or_(Job.status == RUNNING, REAPED)


def rowcount(session: Session, statement: Update | Delete) -> int:
    # An UPDATE or DELETE always yields a CursorResult; Session.execute's stubs only promise the Result base class.
    return cast(CursorResult[Any], session.execute(statement)).rowcount
