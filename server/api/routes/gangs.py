"""Gangs, for workers: join a job across several workers, beat the membership until the gang is full (then
start the ranks at the rendezvous it names) or dissolved, or leave it.

A full gang's job runs under one lease, node 0's: node 0 heartbeats and reports the job through `/leases`
like any job, with the lease its beat hands it. Every other member only beats its membership, and the member
whose node runs global rank 0 (torch numbers the nodes itself) carries the job's progress on its beat; a 409 to a
beat (`job_status` says what the job is now) means the membership ended (the gang was dissolved, or its
attempt ended or was lost with a member) and the member stops its ranks. The member whose node ran global
rank 0 reports the result under its membership, even once its attempt ended: the result is taken as a late
result under that attempt's lease would be.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from fastapi import APIRouter, BackgroundTasks, HTTPException, Response, status
from sqlalchemy.orm import Session

from padbench.contract.api import LeaseOut, LeaseRequest
from padbench.contract.gangs import (
    GangBeat,
    GangComplete,
    GangJoin,
    GangJoined,
    GangLeave,
    GangNode,
    GangRendezvous,
    GangState,
)
from padbench.server import queue
from padbench.server.api.deps import JobIdPath, SessionDep, SettingsDep, WorkerAuth
from padbench.server.api.responses import LEASE_RESPONSES, error_responses
from padbench.server.api.routes.leases import claimant, lease_conflict, result_of_kind, store_result
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.api.views import job_out
from padbench.server.core.config import Settings
from padbench.server.core.security import Principal
from padbench.server.db import reads
from padbench.server.db.models import Job
from padbench.server.queue.gangs import Membership

router = APIRouter(prefix="/gangs", tags=["gangs"], route_class=UnitOfWorkRoute)


def reap_gangs(session: Session, settings: Settings) -> int:
    """Gangs that lost a member or cannot fill in time, and memberships that can report nothing any more: how
    many jobs moved."""
    moved = queue.requeue_gangs_missing_a_member(session, grace_seconds=settings.lease_grace_seconds)
    queue.remove_stale_members(session)
    queue.dissolve_unformed_gangs(session, form_seconds=settings.gang_form_seconds,
                                  grace_seconds=settings.lease_grace_seconds)
    return moved


@router.post("", response_model=GangJoined,
             responses={204: {"description": "No job across several workers this worker can join"},
                        **error_responses(404)})
def join(body: GangJoin, session: SessionDep, settings: SettingsDep, principal: WorkerAuth) -> GangJoined | Response:
    worker, offered, owned, free = claimant(session, LeaseRequest(worker_id=body.worker_id, gpus_free=body.gpus_free),
                                            settings, principal)
    reap_gangs(session, settings)
    member = queue.join_gang(session, worker_id=worker.id, offered=offered, lease_seconds=settings.lease_seconds,
                             address=body.address, port=body.port, gpus_owned=owned, gpus_free=free)
    if member is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    queue.start_full_gang(session, member.job_id, lease_seconds=settings.lease_seconds)
    membership = Membership(member.job_id, member.node_rank, member.attempt_token)
    job = session.get_one(Job, member.job_id, populate_existing=True)
    return GangJoined(member_token=member.member_token, job=job_out(job, None),
                      state=gang_state(session, job, membership, member.expires_at))


@router.post("/{job_id}/beat", responses=LEASE_RESPONSES)
def beat(job_id: JobIdPath, body: GangBeat, session: SessionDep, settings: SettingsDep,
         principal: WorkerAuth) -> GangState:
    require_member(session, body.member_token, principal)
    reap_gangs(session, settings)
    membership = queue.beat_membership(session, body.member_token, lease_seconds=settings.lease_seconds)
    if membership is None or membership.job_id != job_id:
        raise lease_conflict(session, job_id)
    queue.record_member_progress(session, body.member_token, progress=body.progress, message=body.message)
    job = session.get_one(Job, job_id, populate_existing=True)
    return gang_state(session, job, membership, reads.member_expiry(session, body.member_token))


@router.post("/{job_id}/complete", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def complete(job_id: JobIdPath, body: GangComplete, session: SessionDep, settings: SettingsDep,
             principal: WorkerAuth, background: BackgroundTasks) -> None:
    """The result, from the member whose node ran global rank 0, under the attempt its membership belongs to:
    taken from an attempt that ended too, as long as the job has no result yet and has not ended otherwise
    (the first result wins; a retry of the winning report answers 204 again)."""
    require_member(session, body.member_token, principal)
    attempt = reads.member_attempt(session, body.member_token, job_id)
    if attempt is None:
        raise lease_conflict(session, job_id)
    store_result(session, settings, background, job_id, attempt, body.result,
                 result_of_kind(session, job_id, body.result))


@router.post("/{job_id}/leave", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def leave(job_id: JobIdPath, body: GangLeave, session: SessionDep, principal: WorkerAuth) -> None:
    """The worker stops before its gang is full: the forming gang is dissolved, its job stays queued."""
    require_member(session, body.member_token, principal)
    if queue.leave_gang(session, body.member_token) == 0:
        raise lease_conflict(session, job_id)


def require_member(session: Session, member_token: str, principal: Principal) -> None:
    """403 when the membership was granted to a worker of another worker token."""
    worker_id = reads.find_member_worker(session, member_token)
    worker = None if worker_id is None else reads.find_worker(session, worker_id)
    if worker is not None and worker.principal != principal.name and not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "member_token: the membership was granted to another "
                                                       "worker token")


def gang_state(session: Session, job: Job, membership: Membership, expires: datetime) -> GangState:
    members = reads.gang_members(session, job.id, membership.attempt_token)
    started = membership.attempt_token is not None and job.status == "running"
    state = GangState(job_id=job.id, node_rank=membership.node_rank, nodes=job.nodes,
                      members=[GangNode(node_rank=m.node_rank, worker=m.worker_name) for m in members],
                      member_expires_at=expires)
    if not started or not members or members[0].node_rank != 0:
        return state
    assert membership.attempt_token is not None and job.lease_expires_at is not None
    host = members[0].address
    endpoint = f"[{host}]:{members[0].port}" if ":" in host else f"{host}:{members[0].port}"
    rendezvous = GangRendezvous(endpoint=endpoint, run_id=run_id(job.id, membership.attempt_token), nodes=job.nodes,
                                node_rank=membership.node_rank)
    lease = (LeaseOut(job=job_out(job, members[0].worker_name), lease_token=membership.attempt_token,
                      lease_expires_at=job.lease_expires_at) if membership.node_rank == 0 else None)
    return state.model_copy(update={"rendezvous": rendezvous, "lease": lease})


def run_id(job_id: int, attempt_token: str) -> str:
    """The attempt's rendezvous name: new for every attempt, and telling nothing of its lease token."""
    return f"padbench-job{job_id}-{hashlib.sha256(attempt_token.encode()).hexdigest()[:16]}"
