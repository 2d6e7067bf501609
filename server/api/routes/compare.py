"""`GET /v1/compare?ids=3,4`: jobs of one kind side by side, by the rule `padbench compare` prints with, so the
dashboard's comparison and the CLI's are the same rows, figures and ratios."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query
from pydantic import ValidationError

from padbench.contract.bounds import MAX_DB_ID
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.table import MAX_COMPARED, Comparison
from padbench.report.compare import CompareError, compare, comparison_model
from padbench.server.api.deps import ReaderAuth, ReadSessionDep
from padbench.server.api.errors import HTTP_UNPROCESSABLE
from padbench.server.api.responses import error_responses
from padbench.server.api.routes.jobs import stored_result
from padbench.server.api.transactions import UnitOfWorkRoute

router = APIRouter(prefix="/compare", tags=["jobs"], route_class=UnitOfWorkRoute)
# Two to eight job ids, separated by commas, each within the ids' column.
COMPARED_IDS = rf"^[1-9]\d{{0,9}}(,[1-9]\d{{0,9}}){{1,{MAX_COMPARED - 1}}}$"


@router.get("", responses=error_responses(404))
def get_comparison(ids: Annotated[str, Query(pattern=COMPARED_IDS, max_length=100)], session: ReadSessionDep,
                   principal: ReaderAuth) -> Comparison:
    """Two to eight finished jobs of one kind: each row's figure per job and its ratio to the first job's; 404
    for a job the caller cannot read or that has no result yet, 422 for jobs of different kinds."""
    job_ids = [int(part) for part in ids.split(",")]
    past = [job_id for job_id in job_ids if job_id > MAX_DB_ID]
    if past:  # no job has such an id, and the database's integer column cannot even be asked about it
        raise HTTPException(HTTP_UNPROCESSABLE, f"ids: {past[0]} is past the largest job id ({MAX_DB_ID})")
    documents = [stored_result(session, job_id, principal) for job_id in job_ids]
    try:
        results = [JOB_RESULT_ADAPTER.validate_python(document) for document in documents]
        return comparison_model(compare(list(zip(job_ids, results, strict=True))))
    except ValidationError:
        raise HTTPException(HTTP_UNPROCESSABLE, "ids: a stored result does not match this server's result "
                                                "contract, so it cannot be compared") from None
    except CompareError as error:
        raise HTTPException(HTTP_UNPROCESSABLE, f"ids: {error}") from None
