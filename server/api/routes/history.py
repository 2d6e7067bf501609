"""`GET /v1/history/{fingerprint}` and `GET /v1/history?job=ID`: a row's figure over time, the versions that
changed between its points. Rows are matched by fingerprint (`padbench.report.fingerprint`) over the newest
stored results the caller may read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status

from padbench.contract.bounds import MAX_DB_ID
from padbench.contract.history import Histories, History
from padbench.report.history import fingerprints_of, histories, history
from padbench.server.api.deps import ReaderAuth, ReadSessionDep
from padbench.server.api.responses import error_responses
from padbench.server.api.stored_results import job_result, recent_results
from padbench.server.api.transactions import UnitOfWorkRoute

router = APIRouter(prefix="/history", tags=["history"], route_class=UnitOfWorkRoute)
FingerprintPath = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")]


@router.get("", responses=error_responses(404))
def get_job_history(job: Annotated[int, Query(ge=1, le=MAX_DB_ID)], session: ReadSessionDep,
                    principal: ReaderAuth) -> Histories:
    """The history of every row of the job's result; 404 for a job the caller cannot read or without a result."""
    result = job_result(session, job, principal)
    stored = recent_results(session, principal, result.kind)
    return Histories(histories=histories(dict.fromkeys(fingerprints_of(result)), stored))


@router.get("/{fingerprint}", responses=error_responses(404))
def get_history(fingerprint: FingerprintPath, session: ReadSessionDep, principal: ReaderAuth) -> History:
    """Every stored row of this fingerprint that the caller may read, oldest first; 404 when there is none."""
    found = history(fingerprint, recent_results(session, principal, None))
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no stored row has fingerprint {fingerprint}")
    return found
