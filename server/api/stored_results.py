"""Stored result documents read back as the contract's models, for the views that read many of them at once
(a row's history, a baseline check)."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from pydantic import ValidationError
from sqlalchemy.orm import Session

from padbench.contract.history import MAX_SEARCHED
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.server.api.errors import HTTP_UNPROCESSABLE
from padbench.server.api.routes.jobs import owner_filter, stored_result
from padbench.server.api.views import finite_json
from padbench.server.core.security import Principal
from padbench.server.db import reads


def readable(document: dict[str, Any]) -> JobResultBase | None:
    """The document as its kind's result; None for one stored under a contract this server no longer reads."""
    try:
        return JOB_RESULT_ADAPTER.validate_python(finite_json(document))
    except ValidationError:
        return None


def job_result(session: Session, job_id: int, principal: Principal) -> JobResultBase:
    """The job's result; 404 as for its /results, 422 when it no longer matches the contract."""
    result = readable(stored_result(session, job_id, principal))
    if result is None:
        raise HTTPException(HTTP_UNPROCESSABLE, f"job {job_id}: its stored result does not match this server's "
                                                "result contract")
    return result


def recent_results(session: Session, principal: Principal, kind: str | None) -> list[tuple[int, JobResultBase]]:
    """The newest stored results the caller may read (of `kind` when given), each as its kind's result."""
    documents = reads.recent_results(session, submitter=owner_filter(principal), kind=kind, limit=MAX_SEARCHED)
    parsed = [(job_id, readable(document)) for job_id, document in documents]
    return [(job_id, result) for job_id, result in parsed if result is not None]
