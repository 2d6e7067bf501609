"""Jobs, for submitters: submit, list, read, read results, cancel; for admins also prune. Submitters see
only their own jobs; admins see all. Someone else's job answers 404, exactly like a job that does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response, status
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from padbench.contract.api import (
    IDEMPOTENCY_KEY_HEADER,
    REPLAYED_HEADER,
    JobCreate,
    JobCreated,
    JobOut,
    JobPage,
    JobsPrune,
    JobsPruned,
    JobStatus,
    VerdictOut,
)
from padbench.contract.bounds import MAX_DB_ID
from padbench.contract.kinds import JOB_SPEC_ADAPTER, JobResult
from padbench.contract.spec import JobSpecBase
from padbench.contract.table import ResultTable
from padbench.report.ranking import RankBy
from padbench.server import queue
from padbench.server.api.deps import (
    AdminAuth,
    IdempotencyKeyHeader,
    JobIdPath,
    ReaderAuth,
    ReadSessionDep,
    SessionDep,
    SettingsDep,
    SubmitterAuth,
)
from padbench.server.api.errors import HTTP_UNPROCESSABLE
from padbench.server.api.responses import error_responses
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.api.views import finite_json, job_out, job_summary, table_of, verdict_of
from padbench.server.capacity import capacity_problem
from padbench.server.core.security import Principal
from padbench.server.cost import over_limits
from padbench.server.db import reads
from padbench.server.db.baselines import regression_flags
from padbench.server.paths import path_errors
from padbench.server.requirements import job_requirements, stored_gpus
from padbench.server.waiting import waiting_reason

router = APIRouter(prefix="/jobs", tags=["jobs"], route_class=UnitOfWorkRoute)
# The verdict by speed, or by $ per million tokens at the price its worker was given (`padbench.report.ranking`).
RankByQuery = Annotated[RankBy, Query(description="rank the verdict by speed or by cost")]


def owner_filter(principal: Principal) -> str | None:
    return None if principal.reads_everything else principal.name


def not_found(job_id: int) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} not found")


REPLAY_RESPONSE = {
    "model": JobCreated,
    "description": "A retry: this submitter already sent the same spec with this `Idempotency-Key`; the body "
                   "names the job that first request created (and its status now). Nothing new is queued.",
    "headers": {REPLAYED_HEADER: {"description": "`true`", "schema": {"type": "string"}}},
}


@router.post("", status_code=status.HTTP_201_CREATED, responses={200: REPLAY_RESPONSE, **error_responses(409)})
def submit_job(body: JobCreate, response: Response, session: SessionDep, settings: SettingsDep,
               principal: SubmitterAuth, idempotency_key: IdempotencyKeyHeader = None) -> JobCreated:
    """Queue a job (201). Send an `Idempotency-Key` header to make retrying safe: a retry of the same submit
    with the same key answers 200 with the job the first attempt created, whether or not that attempt's
    answer arrived, and never queues a second one."""
    spec = body.spec
    refused = path_errors(spec) + [{"loc": ["spec", *where], "msg": why, "type": "new_job_refused"}
                                   for where, why in spec.new_job_problems()]
    if refused:
        raise HTTPException(HTTP_UNPROCESSABLE, refused)
    too_costly = over_limits(spec, max_tokens=settings.max_job_tokens, max_flops=settings.max_job_flops)
    if too_costly is not None:
        raise HTTPException(HTTP_UNPROCESSABLE, [{"loc": ["spec"], "msg": too_costly, "type": "job_too_costly"}])
    too_large = capacity_problem(spec, reads.live_workers(session, within_seconds=settings.lease_seconds))
    if too_large is not None:
        raise HTTPException(HTTP_UNPROCESSABLE, [{"loc": ["spec", "model"], "msg": too_large,
                                                  "type": "model_too_large"}])
    document = JOB_SPEC_ADAPTER.dump_python(spec, mode="json")
    job_id = queue.insert_job(
        session,
        kind=spec.kind,
        name=spec.name,
        spec=document,
        submitter=principal.name,
        max_attempts=settings.max_attempts,
        requirements=job_requirements(spec),
        gpus=stored_gpus(spec),
        nodes=spec.nodes,
        idempotency_key=idempotency_key,
    )
    if job_id is None:
        assert idempotency_key is not None  # only a known key inserts nothing
        response.status_code = status.HTTP_200_OK
        response.headers[REPLAYED_HEADER] = "true"
        return replayed_submit(session, principal.name, idempotency_key, document)
    return JobCreated(id=job_id, status=JobStatus.queued)


def replayed_submit(session: Session, submitter: str, idempotency_key: str, spec: dict[str, Any]) -> JobCreated:
    """The job an earlier submit created under this key; 422 when that submit was of another spec."""
    job = reads.find_submitted_job(session, submitter=submitter, idempotency_key=idempotency_key)
    if job is None:  # PostgreSQL: retention removed it between the INSERT and this read
        raise HTTPException(status.HTTP_409_CONFLICT, f"{IDEMPOTENCY_KEY_HEADER}: the job submitted with this key "
                            "was removed while this request ran; submit again")
    if job.spec != spec:
        reason = f"already used for job {job.id} with a different spec; send a new key for a new job"
        raise HTTPException(HTTP_UNPROCESSABLE, [{"loc": ["header", IDEMPOTENCY_KEY_HEADER], "msg": reason,
                                                  "type": "idempotency_key_reused"}])
    return JobCreated(id=job.id, status=JobStatus(job.status))


@router.post("/prune")
def prune_jobs(body: JobsPrune, session: SessionDep, principal: AdminAuth) -> JobsPruned:
    """Remove the jobs that finished (succeeded, failed or cancelled) more than `older_than_days` ago, with
    their results; queued and running jobs stay, however old. Admin tokens only."""
    return JobsPruned(removed=queue.delete_finished_jobs(session, older_than_days=body.older_than_days))


@router.get("")
def list_jobs(
    session: ReadSessionDep,
    principal: ReaderAuth,
    job_status: Annotated[JobStatus | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_DB_ID)] = 0,
) -> JobPage:
    rows, total = reads.list_jobs(
        session, submitter=owner_filter(principal), status=job_status.value if job_status else None,
        limit=limit, offset=offset,
    )
    items = [job_summary(row.job, row.worker_name, row.worker_capabilities) for row in rows]
    return JobPage(items=items, total=total, limit=limit, offset=offset)


@router.get("/{job_id}", responses=error_responses(404))
def get_job(job_id: JobIdPath, session: ReadSessionDep, settings: SettingsDep, principal: ReaderAuth) -> JobOut:
    """The job; a queued one that no worker in contact could take says why (`waiting_reason`)."""
    row = reads.find_job(session, job_id, submitter=owner_filter(principal))
    if row is None:
        raise not_found(job_id)
    reason = None
    if row.job.status == JobStatus.queued.value:
        # A worker that has not been heard from for a whole lease would have lost any lease it held.
        live = reads.live_workers(session, within_seconds=settings.lease_seconds)
        spec = stored_spec(row.job.spec)
        reason = None if spec is None else waiting_reason(spec, live)
    return job_out(row.job, row.worker_name, row.worker_capabilities, reason, regression_flags(session, job_id))


def stored_spec(document: dict[str, Any]) -> JobSpecBase | None:
    """A stored spec as its kind's model; None for one stored under a contract this server no longer reads."""
    try:
        return JOB_SPEC_ADAPTER.validate_python(document)
    except ValidationError:
        return None


def stored_result(session: Session, job_id: int, principal: Principal) -> dict[str, Any]:
    """The job's result document as stored; 404 when the job is not the caller's to read or has none yet.

    It was validated against the contract when the worker reported it; a non-finite figure stored before
    results refused them reads as null (not measured): NaN is not JSON."""
    row = reads.find_job(session, job_id, submitter=owner_filter(principal))
    if row is None:
        raise not_found(job_id)
    result = reads.find_result(session, job_id)
    if result is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no results (status {row.job.status})")
    return finite_json(result)


@router.get("/{job_id}/results", response_model=JobResult, responses=error_responses(404))
def get_results(job_id: JobIdPath, session: ReadSessionDep, principal: ReaderAuth) -> JSONResponse:
    """The stored result document (the contract's PaddingResult or AttentionResult); 404 until there is one."""
    return JSONResponse(stored_result(session, job_id, principal))


@router.get("/{job_id}/verdict", responses=error_responses(404))
def get_verdict(job_id: JobIdPath, session: ReadSessionDep, principal: ReaderAuth,
                rank_by: RankByQuery = "speed") -> VerdictOut:
    """What the result's rows add up to, in the words `padbench results` prints under its table (the dashboard
    shows these, so the two never disagree), and the rows it highlights and dims; 404 until there is a result.
    `rank_by=cost` states it in $ per million tokens, or says that no price is known and ranks by speed."""
    return verdict_of(stored_result(session, job_id, principal), rank_by)


@router.get("/{job_id}/table", responses=error_responses(404))
def get_table(job_id: JobIdPath, session: ReadSessionDep, principal: ReaderAuth,
              rank_by: RankByQuery = "speed") -> ResultTable:
    """The result's table as `padbench results` prints it, as one model (header, columns, cells in the CLI's
    order, the verdict's marks, notes and the lines below): the dashboard renders this, so both show the same
    cells. No columns for a kind that draws its own view; 404 until there is a result. `rank_by` as for the
    verdict."""
    return table_of(stored_result(session, job_id, principal), rank_by)


@router.post("/{job_id}/cancel", responses=error_responses(404, 409))
def cancel_job(job_id: JobIdPath, session: SessionDep, principal: SubmitterAuth) -> JobOut:
    """Queued: cancelled at once. Running: cancel requested; the worker stops it and reports."""
    owner = None if principal.is_admin else principal.name
    changed = queue.request_cancel(session, job_id, submitter=owner)
    row = reads.find_job(session, job_id, submitter=owner)
    if row is None:
        raise not_found(job_id)
    if changed is None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} is already {row.job.status}")
    return job_out(row.job, row.worker_name, row.worker_capabilities)
