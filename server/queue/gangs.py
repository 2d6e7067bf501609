"""A job across several workers, held by a gang: join, start when full, beat, leave, dissolve and reap.

A member is live while it belongs to the job's forming gang (no attempt yet, the job queued) or to the
job's running attempt (its attempt token is the job's lease). A member of an attempt that ended (requeued,
or failed by the reaper) is no longer live but stays while the job can still take a result: it records who
ran that attempt, and its token reports that attempt's late result as a lease's would. So every statement
about a forming gang counts only the members without an attempt, and one about a running attempt only that
attempt's members. A forming gang's member whose job left the queue, and any member of a job that can take
no result any more, is stale and is removed. The rules are in the package's docstring (`padbench.server.queue`).
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, delete, exists, func, insert, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from padbench.server.db.clock import db_now
from padbench.server.db.models import FORMING_MEMBER, HELD_BY_GANG, GangMember, Job, JobAttempt, JobRequirement
from padbench.server.queue.fences import AWAITS_RESULT, PLAIN_UPDATE, QUEUED, RUNNING, held_by_gang, rowcount
from padbench.server.queue.jobs import fits_free_gpus, reaped_values
from padbench.server.queue.leases import progress_values


@dataclass(frozen=True)
class Membership:
    """A live member as its beat finds it: the job, its node rank, and the attempt it runs (None: forming)."""

    job_id: int
    node_rank: int
    attempt_token: str | None


def _forming(member: type[GangMember], job: type[Job]) -> ColumnElement[bool]:
    return and_(member.attempt_token.is_(None), job.status == QUEUED)


def _running(member: type[GangMember], job: type[Job]) -> ColumnElement[bool]:
    return and_(member.attempt_token == job.lease_token, job.status == RUNNING)


def _is_live(member: type[GangMember]) -> ColumnElement[bool]:
    """The member belongs to its job's forming gang or to the job's running attempt."""
    return exists().where(Job.id == member.job_id, or_(_forming(member, Job), _running(member, Job)))


def _is_kept(member: type[GangMember]) -> ColumnElement[bool]:
    """The member belongs to its job's forming gang, or to an attempt (running or ended) of a job that can
    still take a result."""
    ran_an_attempt = and_(member.attempt_token.is_not(None), AWAITS_RESULT)
    return exists().where(Job.id == member.job_id, or_(_forming(member, Job), ran_an_attempt))


def join_gang(
    session: Session, *, worker_id: int, offered: Collection[str], lease_seconds: float, address: str, port: int,
    gpus_owned: int = 0, gpus_free: int = 0,
) -> GangMember | None:
    """Join the oldest queued job across several workers whose gang is not full, that this worker can run on
    its `gpus_free` GPUs and has not joined already: the member row, or None when there is none (or another
    joiner took the same node rank first). `address` and `port` are where this worker would host the gang's
    rendezvous if it is node 0."""
    candidate = aliased(Job, name="candidate")
    members = aliased(GangMember, name="members")
    forming = and_(members.job_id == candidate.id, members.attempt_token.is_(None))
    joined = select(func.count()).where(forming).scalar_subquery()
    lacks_requirement = exists().where(
        JobRequirement.job_id == candidate.id, JobRequirement.capability.not_in(sorted(offered))
    )
    # A worker that ran an ended attempt of the job may join its next gang.
    joined_already = exists().where(forming, members.worker_id == worker_id)
    token = secrets.token_urlsafe(24)
    chosen = (
        select(literal(token), candidate.id, joined, literal(worker_id), literal(address), literal(port),
               db_now(), db_now(lease_seconds))
        .where(candidate.status == QUEUED, candidate.nodes > 1, joined < candidate.nodes, ~lacks_requirement,
               ~joined_already, fits_free_gpus(candidate, gpus_owned, gpus_free))
        .order_by(candidate.id)
        .limit(1)
    )
    insert_unless_taken = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    statement = (
        insert_unless_taken(GangMember)
        .from_select(["member_token", "job_id", "node_rank", "worker_id", "address", "port", "joined_at",
                      "expires_at"], chosen)
        .on_conflict_do_nothing(index_elements=[GangMember.job_id, GangMember.node_rank], index_where=FORMING_MEMBER)
        .returning(GangMember.member_token)
    )
    if session.execute(statement).scalar_one_or_none() is None:
        return None
    return session.get(GangMember, token)


def start_full_gang(session: Session, job_id: int, *, lease_seconds: float) -> Job | None:
    """Start the job when its gang is full: one attempt, counted now, whose lease node 0's worker holds; every
    forming member is stamped with the attempt. None when the job is not queued or its gang is not full."""
    forming = and_(GangMember.job_id == Job.id, GangMember.attempt_token.is_(None))
    full = select(func.count()).where(forming).scalar_subquery() == Job.nodes
    node_zero = select(GangMember.worker_id).where(forming, GangMember.node_rank == 0)
    token = secrets.token_urlsafe(24)
    statement = (
        update(Job).where(Job.id == job_id, Job.status == QUEUED, Job.nodes > 1, full)
        .values(status=RUNNING, attempts=Job.attempts + 1, worker_id=node_zero.scalar_subquery(), lease_token=token,
                lease_expires_at=db_now(lease_seconds), started_at=db_now(), error=None, traceback=None,
                progress=None, progress_message=None)
        .returning(Job)
        .execution_options(**PLAIN_UPDATE)
    )
    job = session.scalars(statement).one_or_none()
    if job is None:
        return None
    session.execute(insert(JobAttempt).values(lease_token=token, job_id=job_id, worker_id=job.worker_id,
                                              claimed_at=db_now(), held_by=HELD_BY_GANG))
    session.execute(update(GangMember).where(GangMember.job_id == job_id, GangMember.attempt_token.is_(None))
                    .values(attempt_token=token).execution_options(**PLAIN_UPDATE))
    return job


def beat_membership(session: Session, member_token: str, *, lease_seconds: float) -> Membership | None:
    """A member's heartbeat: its membership is extended while it is live; None when it is not (the gang was
    dissolved, the attempt ended, or the job went on without it)."""
    statement = (
        update(GangMember).where(GangMember.member_token == member_token, _is_live(GangMember))
        .values(expires_at=db_now(lease_seconds))
        .returning(GangMember.job_id, GangMember.node_rank, GangMember.attempt_token)
        .execution_options(**PLAIN_UPDATE)
    )
    row = session.execute(statement).one_or_none()
    return None if row is None else Membership(row.job_id, row.node_rank, row.attempt_token)


def record_member_progress(session: Session, member_token: str, *, progress: float | None,
                           message: str | None) -> bool:
    """The job's progress, from the member whose node runs global rank 0 (torch numbers the nodes itself, so
    that need not be node 0, which holds the lease): stored on the job only while the member belongs to its
    running attempt. A beat without progress keeps the last progress shown, as a lease's heartbeat does, so
    neither node 0's heartbeat nor this beat wipes what the other sent. False when nothing was stored."""
    values = progress_values(progress, message)
    if not values:
        return False
    of_running_attempt = exists().where(GangMember.member_token == member_token, GangMember.job_id == Job.id,
                                        _running(GangMember, Job))
    statement = update(Job).where(of_running_attempt).values(**values).execution_options(**PLAIN_UPDATE)
    return rowcount(session, statement) == 1


def leave_gang(session: Session, member_token: str) -> int:
    """A member leaves its forming gang (its worker stops): the whole gang is dissolved, so the node ranks
    start again from 0 for the next one; the others learn it at their next beat. Returns the members removed
    (0 when the member is in no forming gang)."""
    gang = select(GangMember.job_id).where(GangMember.member_token == member_token,
                                           GangMember.attempt_token.is_(None)).scalar_subquery()
    return rowcount(session, delete(GangMember).where(GangMember.job_id == gang, GangMember.attempt_token.is_(None))
                    .execution_options(**PLAIN_UPDATE))


def dissolve_unformed_gangs(session: Session, *, form_seconds: float, grace_seconds: float) -> int:
    """Forming gangs that did not fill within `form_seconds` of their first join, or one of whose members
    missed its beat by more than `grace_seconds`, are removed whole: their workers' GPUs go back to other work.
    Returns the members removed."""
    stalled = (
        select(GangMember.job_id).where(GangMember.attempt_token.is_(None)).group_by(GangMember.job_id)
        .having(or_(func.min(GangMember.joined_at) <= db_now(-form_seconds),
                    func.min(GangMember.expires_at) <= db_now(-grace_seconds)))
    )
    statement = delete(GangMember).where(GangMember.attempt_token.is_(None), GangMember.job_id.in_(stalled))
    return rowcount(session, statement.execution_options(**PLAIN_UPDATE))


def remove_stale_members(session: Session) -> int:
    """Members of forming gangs whose job left the queue (claimed whole, or ended), and every member of a job
    that can take no result any more (succeeded, cancelled, or failed otherwise than by its last lease
    expiring). Members of an ended attempt of a job still awaiting a result stay: their late result is
    taken. A deleted job takes its members with it. Returns how many were removed."""
    return rowcount(session, delete(GangMember).where(~_is_kept(GangMember)).execution_options(**PLAIN_UPDATE))


def requeue_gangs_missing_a_member(session: Session, *, grace_seconds: float) -> int:
    """The gang reaper: a running gang one of whose members (beyond node 0, whose beat is the job's own lease)
    missed its beat by more than `grace_seconds` loses its attempt, as a job whose lease was missed does.
    A job across nodes claimed whole by one worker has no members and is never moved here. Returns how many
    jobs it moved."""
    missed = exists().where(GangMember.job_id == Job.id, GangMember.attempt_token == Job.lease_token,
                            GangMember.node_rank > 0, GangMember.expires_at <= db_now(-grace_seconds))
    statement = (update(Job).where(Job.status == RUNNING, held_by_gang(), missed).values(**reaped_values())
                 .execution_options(**PLAIN_UPDATE))
    return rowcount(session, statement)
