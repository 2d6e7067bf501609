"""Baselines: `PUT /v1/baselines/{name}` names a finished job's result (submitters may set them), `GET
/v1/baselines` lists them, and `GET /v1/baselines/{name}/check?job=ID` compares a job's rows with the
baseline's rows of the same fingerprint: slower beyond noise (Welch's t-test on the repeats) and beyond
`tolerance` regresses, and the answer names each such row with its ratio and Fieller's 95% interval.

A baseline is shared: every reader may check against it, whoever's job it names; only the principal that set a
name, or an admin, may move it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status
from sqlalchemy.orm import Session

from padbench.contract.bounds import MAX_DB_ID
from padbench.contract.history import BaselineOut, BaselineSet, RegressionCheck
from padbench.contract.results import JobResultBase
from padbench.report.regression import NothingToCompare, check_against
from padbench.server.api.deps import ReaderAuth, ReadSessionDep, SessionDep, SubmitterAuth
from padbench.server.api.errors import HTTP_UNPROCESSABLE
from padbench.server.api.responses import error_responses
from padbench.server.api.stored_results import job_result, readable
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.db import reads
from padbench.server.db.baselines import find_baseline, list_baselines, set_baseline
from padbench.server.db.models import Baseline

router = APIRouter(prefix="/baselines", tags=["baselines"], route_class=UnitOfWorkRoute)
NamePath = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]


def baseline_out(baseline: Baseline) -> BaselineOut:
    return BaselineOut(name=baseline.name, job_id=baseline.job_id, set_by=baseline.set_by, set_at=baseline.set_at)


@router.put("/{name}", responses=error_responses(404))
def put_baseline(name: NamePath, body: BaselineSet, session: SessionDep, principal: SubmitterAuth) -> BaselineOut:
    """Name the job's result `name`; 404 for a job the caller cannot read or without a result, 403 for a name
    another principal set."""
    job_result(session, body.job_id, principal)  # readable by the caller, finished, under this contract
    existing = find_baseline(session, name)
    if existing is not None and existing.set_by != principal.name and not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"name: baseline {name!r} was set by {existing.set_by}; "
                                                       "only they or an admin may move it")
    return baseline_out(set_baseline(session, name=name, job_id=body.job_id, set_by=principal.name))


@router.get("")
def get_baselines(session: ReadSessionDep, principal: ReaderAuth) -> list[BaselineOut]:
    """Every baseline, by name."""
    return [baseline_out(baseline) for baseline in list_baselines(session)]


def baseline_result(session: Session, baseline: Baseline) -> JobResultBase:
    """The baseline's result, whoever's job it is: setting a baseline shares its result with every reader."""
    result = readable(reads.find_result(session, baseline.job_id) or {})
    if result is None:
        raise HTTPException(HTTP_UNPROCESSABLE, f"name: baseline {baseline.name!r}'s result (job "
                                                f"{baseline.job_id}) does not match this server's result contract")
    return result


@router.get("/{name}/check", responses=error_responses(404))
def check_baseline(name: NamePath, job: Annotated[int, Query(ge=1, le=MAX_DB_ID)], session: ReadSessionDep,
                   principal: ReaderAuth,
                   tolerance: Annotated[float, Query(ge=0, lt=1)] = 0.0) -> RegressionCheck:
    """The job's rows against the baseline's of the same fingerprint; 422 when none matches."""
    baseline = find_baseline(session, name)
    if baseline is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no baseline named {name!r}")
    result = job_result(session, job, principal)
    try:
        return check_against((job, result), (name, baseline.job_id, baseline_result(session, baseline)), tolerance)
    except NothingToCompare as error:
        raise HTTPException(HTTP_UNPROCESSABLE, f"job: {error}") from None
