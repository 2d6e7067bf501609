"""Leases, for workers: claim the next job, then heartbeat, complete, fail or release it; a job stopped on a
cancel request after finishing some rows reports them (`cancelled`), marked partial.

The lease token travels in the body, never the URL. A result (`complete`) is taken under any lease the job
was ever granted, expired or taken over included: the first result wins, a retry of the report that won
answers 204 again, and any later one gets 409. A heartbeat extends the job's current lease, or resumes the
lease the reaper took from the job's latest attempt if nobody claimed the job since. fail, release and
cancelled count only under the job's current, unexpired lease. Every 409 says the job's status
(`job_status`); a 409 to a heartbeat means the lease is lost (the job ended, or it went to another worker
once the lease was missed past its grace), and the worker stops its run, so a job never runs twice. A
token that is one of the job's leases but was granted to a worker of another worker token gets 403: a
leaked or guessed lease token is not enough to speak for someone else's worker.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Response, status
from sqlalchemy.orm import Session

from padbench.contract.api import (
    Capabilities,
    Heartbeat,
    HeartbeatAck,
    JobStatus,
    LeaseCancelled,
    LeaseComplete,
    LeaseFail,
    LeaseOut,
    LeaseRelease,
    LeaseRequest,
)
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.server import queue
from padbench.server.api.deps import JobIdPath, SessionDep, SettingsDep, WorkerAuth
from padbench.server.api.errors import HTTP_UNPROCESSABLE, LeaseConflict
from padbench.server.api.responses import LEASE_RESPONSES, error_responses
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.api.views import job_out
from padbench.server.core.config import Settings
from padbench.server.core.security import Principal
from padbench.server.db import reads
from padbench.server.db.models import Worker
from padbench.server.db.workers import record_contact, record_lease_holder_contact
from padbench.server.regressions import check_new_result, post_regressions
from padbench.server.requirements import gpu_capabilities, offered_capabilities

router = APIRouter(prefix="/leases", tags=["leases"], route_class=UnitOfWorkRoute)


def lease_conflict(session: Session, job_id: int) -> HTTPException:
    """404 when there is no such job; otherwise 409 saying what the job is now."""
    row = reads.find_job(session, job_id, submitter=None)
    if row is None:
        return HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} not found")
    return LeaseConflict(
        f"lease lost: lease_token is not the current lease of job {job_id} (status {row.job.status}); the lease "
        "was missed past its grace, or the job was finished, cancelled or claimed by another worker",
        row.job.status,
    )


def owned_worker(session: Session, worker_id: int, principal: Principal) -> Worker:
    worker = reads.find_worker(session, worker_id)
    if worker is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"worker_id: worker {worker_id} is not registered")
    if worker.principal != principal.name and not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"worker_id: worker {worker_id} belongs to another token")
    return worker


def require_lease_holder(session: Session, job_id: int, lease_token: str, principal: Principal) -> None:
    """403 when `lease_token` is one of job `job_id`'s leases but its worker belongs to another token.

    The lease token names exactly one claim and the claim one worker, for good, so this check cannot
    race with a new claim.
    """
    worker_id = reads.find_lease_worker(session, job_id, lease_token)
    if worker_id is None:
        return  # none of the job's leases: the fenced UPDATE answers 409 (or 404)
    worker = reads.find_worker(session, worker_id)
    if worker is not None and worker.principal != principal.name and not principal.is_admin:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"lease_token: job {job_id}'s lease was granted to another worker token"
        )


def free_gpus(body: LeaseRequest, owned: int) -> int:
    """The worker's free GPUs as its claim says (all it owns when it does not say); 422 past what it owns."""
    if body.gpus_free is None:
        return owned
    if body.gpus_free > owned:
        raise HTTPException(HTTP_UNPROCESSABLE, f"gpus_free: {body.gpus_free} is more than the {owned} GPU(s) "
                                                f"worker {body.worker_id} registered")
    return body.gpus_free


def claimant(session: Session, body: LeaseRequest, settings: Settings,
             principal: Principal) -> tuple[Worker, set[str], int, int]:
    """The worker claiming (or joining a gang), what it offers, the GPUs it owns and those free; leases missed
    past their grace are requeued first, so their jobs can be claimed right now."""
    worker = owned_worker(session, body.worker_id, principal)
    record_contact(session, worker.id)  # an idle worker polling for work is alive
    queue.requeue_expired_leases(session, grace_seconds=settings.lease_grace_seconds)
    capabilities = Capabilities.model_validate(worker.capabilities)
    offered = offered_capabilities(capabilities) | gpu_capabilities(capabilities,
                                                                     queue.queued_gpu_requirements(session))
    owned = capabilities.owned_gpus
    return worker, offered, owned, free_gpus(body, owned)


@router.post("", response_model=LeaseOut,
             responses={204: {"description": "No queued job this worker can run"}, **error_responses(404)})
def claim(body: LeaseRequest, session: SessionDep, settings: SettingsDep, principal: WorkerAuth) -> LeaseOut | Response:
    worker, offered, owned, free = claimant(session, body, settings, principal)
    # A worker that hands jobs to a scheduler claims a job across nodes whole; a plain worker (1) joins gangs.
    max_nodes = Capabilities.model_validate(worker.capabilities).max_nodes
    job = queue.claim_next_job(session, worker_id=worker.id, offered=offered, lease_seconds=settings.lease_seconds,
                               gpus_owned=owned, gpus_free=free, max_nodes=max_nodes)
    if job is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    assert job.lease_token is not None and job.lease_expires_at is not None  # set by the claim
    return LeaseOut(job=job_out(job, worker.name), lease_token=job.lease_token, lease_expires_at=job.lease_expires_at)


@router.post("/{job_id}/heartbeat", responses=LEASE_RESPONSES)
def heartbeat(job_id: JobIdPath, body: Heartbeat, session: SessionDep, settings: SettingsDep,
              principal: WorkerAuth) -> HeartbeatAck:
    require_lease_holder(session, job_id, body.lease_token, principal)
    extension = queue.extend_lease(session, job_id, body.lease_token, lease_seconds=settings.lease_seconds,
                                   progress=body.progress, message=body.message)
    if extension is None:  # not the current lease: perhaps the latest attempt's, reaped and not claimed since
        extension = queue.resume_lease(session, job_id, body.lease_token, lease_seconds=settings.lease_seconds,
                                       progress=body.progress, message=body.message)
    if extension is None:
        raise lease_conflict(session, job_id)
    record_lease_holder_contact(session, job_id, body.lease_token)
    return HeartbeatAck(cancel_requested=extension.cancel_requested, lease_expires_at=extension.lease_expires_at)


@router.post("/{job_id}/complete", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def complete(job_id: JobIdPath, body: LeaseComplete, session: SessionDep, settings: SettingsDep,
             principal: WorkerAuth, background: BackgroundTasks) -> None:
    """The job's result; as it is stored, it is checked against every baseline it matches (`regressions`)."""
    store_result(session, settings, background, job_id, body.lease_token,
                 body.result, storable_result(session, job_id, body.lease_token, body.result, principal))


def store_result(session: Session, settings: Settings, background: BackgroundTasks, job_id: int, lease_token: str,
                 result: JobResultBase, stored: dict[str, Any]) -> None:
    """Store `result` (as `stored`) for the job under one of its attempts' leases, the first result winning,
    and check it against the baselines it matches; 409 when it is not taken (none when it is a retry of the
    report that won)."""
    if queue.complete_job(session, job_id, lease_token, stored):
        checks = check_new_result(session, job_id, result, settings.regression_tolerance)
        if settings.webhook_url is not None:  # posted once the result is committed and the worker answered
            background.add_task(post_regressions, settings.webhook_url, settings.webhook_timeout_seconds, checks)
        return
    conflict = completion_conflict(session, job_id, lease_token)
    if conflict is not None:
        raise conflict


def completion_conflict(session: Session, job_id: int, lease_token: str) -> HTTPException | None:
    """Why a result was not taken; None when the job's result IS this lease's report: a retry whose first
    answer was lost gets the same answer (204) again."""
    conflict = lease_conflict(session, job_id)
    if not isinstance(conflict, LeaseConflict) or conflict.job_status is not JobStatus.succeeded:
        return conflict
    if reads.find_result_lease(session, job_id) == lease_token:
        return None
    return LeaseConflict(f"lease_token: job {job_id} already has a result from another attempt; this one is "
                         "not kept", JobStatus.succeeded.value)


@router.post("/{job_id}/cancelled", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def cancelled(job_id: JobIdPath, body: LeaseCancelled, session: SessionDep, principal: WorkerAuth) -> None:
    """The worker stopped the job on its cancel request: the job ends cancelled, keeping the rows it finished."""
    result = storable_result(session, job_id, body.lease_token, body.result, principal)
    assert body.result.partial is not None  # LeaseCancelled refuses a result that is not marked partial
    kept = body.result.partial
    error = (f"cancelled on request after {kept.rows_finished} of {kept.rows_planned} rows; "
             "the finished rows are kept as a partial result")
    if not queue.cancel_with_partial_result(session, job_id, body.lease_token, error, result):
        raise cancel_conflict(session, job_id, body.lease_token)


def storable_result(session: Session, job_id: int, lease_token: str, result: JobResultBase,
                    principal: Principal) -> dict[str, Any]:
    """The result as stored, after checking who sends it (403) and that it is of the job's kind (422)."""
    require_lease_holder(session, job_id, lease_token, principal)
    return result_of_kind(session, job_id, result)


def result_of_kind(session: Session, job_id: int, result: JobResultBase) -> dict[str, Any]:
    """The result as stored; 404 without the job, 422 when the result is of another kind than the job."""
    row = reads.find_job(session, job_id, submitter=None)
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} not found")
    if result.kind != row.job.kind:
        reason = f"{result.kind!r} does not match job {job_id}'s kind {row.job.kind!r}"
        raise HTTPException(HTTP_UNPROCESSABLE, f"result.kind: {reason}")
    return JOB_RESULT_ADAPTER.dump_python(result, mode="json")


def cancel_conflict(session: Session, job_id: int, lease_token: str) -> HTTPException:
    """409 for rows reported while no cancel was requested; otherwise as for any stale lease."""
    row = reads.find_job(session, job_id, submitter=None)
    if row is not None and row.job.lease_token == lease_token and not row.job.cancel_requested:
        return LeaseConflict(f"job {job_id} has no cancel request: a running job reports its whole result "
                             "(complete) or its failure (fail), never partial rows", row.job.status)
    return lease_conflict(session, job_id)


@router.post("/{job_id}/fail", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def fail(job_id: JobIdPath, body: LeaseFail, session: SessionDep, principal: WorkerAuth) -> None:
    require_lease_holder(session, job_id, body.lease_token, principal)
    if not queue.fail_job(session, job_id, body.lease_token, body.error, body.traceback):
        raise lease_conflict(session, job_id)


@router.post("/{job_id}/release", status_code=status.HTTP_204_NO_CONTENT, responses=LEASE_RESPONSES)
def release(job_id: JobIdPath, body: LeaseRelease, session: SessionDep, principal: WorkerAuth) -> None:
    require_lease_holder(session, job_id, body.lease_token, principal)
    if not queue.release_job(session, job_id, body.lease_token):
        raise lease_conflict(session, job_id)
