"""`GET /v1/history/{fingerprint}` and `GET /v1/history?job=ID`: a row's figure over time, the versions that
changed between its points. Rows are matched by fingerprint (`padbench.report.fingerprint`) over the newest
stored results the caller may read. Each point names the baselines set on its job, its row judged against each
baseline among the points, and the flags the automatic check gave its job (what the dashboard marks)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, status
from sqlalchemy.orm import Session

from padbench.contract.bounds import MAX_DB_ID
from padbench.contract.history import Histories, History
from padbench.report.history import Marks, Stored, fingerprints_of, histories, history
from padbench.server.api.deps import ReaderAuth, ReadSessionDep, SettingsDep
from padbench.server.api.responses import error_responses
from padbench.server.api.stored_results import job_result, recent_results
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.db.baselines import baseline_names_by_job, regression_flags_of

router = APIRouter(prefix="/history", tags=["history"], route_class=UnitOfWorkRoute)
FingerprintPath = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$")]


def marks_of(session: Session, stored: list[Stored], tolerance: float) -> Marks:
    """The baselines and the automatic checks' flags of the stored results' jobs."""
    return Marks(baselines=baseline_names_by_job(session),
                 flags=regression_flags_of(session, [job_id for job_id, _ in stored]), tolerance=tolerance)


@router.get("", responses=error_responses(404))
def get_job_history(job: Annotated[int, Query(ge=1, le=MAX_DB_ID)], session: ReadSessionDep,
                    settings: SettingsDep, principal: ReaderAuth) -> Histories:
    """The history of every row of the job's result; 404 for a job the caller cannot read or without a result."""
    result = job_result(session, job, principal)
    stored = recent_results(session, principal, result.kind)
    marks = marks_of(session, stored, settings.regression_tolerance)
    return Histories(histories=histories(dict.fromkeys(fingerprints_of(result)), stored, marks))


@router.get("/{fingerprint}", responses=error_responses(404))
def get_history(fingerprint: FingerprintPath, session: ReadSessionDep, settings: SettingsDep,
                principal: ReaderAuth) -> History:
    """Every stored row of this fingerprint that the caller may read, oldest first; 404 when there is none."""
    stored = recent_results(session, principal, None)
    found = history(fingerprint, stored, marks_of(session, stored, settings.regression_tolerance))
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no stored row has fingerprint {fingerprint}")
    return found
