"""Error bodies: always JSON with a `detail` that names the field and the reason.

Validation errors keep FastAPI's list shape (`[{loc, msg, type}]`, which clients already parse), minus
noise: the `body` prefix, the tag pydantic inserts for the job-kind union (`spec.padding.batch_size`
reads better as `spec.batch_size`) and the labels it puts before a validator's own message.

A database that cannot take a write answers for itself: a full disk is 507 Insufficient Storage (the
request's transaction was rolled back, so nothing half-stored remains and everything stored before is
intact), a database busy past its timeout or a connection pool with no connection free is 503 with
Retry-After. A database out of service (a corrupted or deleted SQLite file, PostgreSQL stopped or the
database dropped) is 503 too, with the reason and a longer Retry-After: clients and workers wait and try
again, and nothing is half-stored meanwhile. Each failure is remembered for `/healthz`. Any other
database error is a bug and stays a 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, HTTPException, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from padbench.contract.api import JobStatus, LeaseConflictOut
from padbench.contract.kinds import JOB_KINDS
from padbench.server.db.failures import DatabaseCondition, DatabaseFailure, classify
from padbench.server.db.recent_failures import RecentFailures
from padbench.specfile import did_you_mean, error_message

log = logging.getLogger("padbench.server")

# Top-level body fields holding a job-kind union (JobCreate.spec, LeaseComplete.result): pydantic puts the
# kind's name, the union's tag, right after them in an error location.
UNION_FIELDS = frozenset({"spec", "result"})
HTTP_UNPROCESSABLE = 422
# A busy SQLite writer holds its lock for milliseconds and a pooled connection frees up as fast: a couple
# of seconds is long enough to find the database free, short enough not to stall a worker's lease.
DATABASE_RETRY_AFTER_SECONDS = 2
# An outage lasts until an administrator acts: clients come back less often, and still see it end soon.
OUTAGE_RETRY_AFTER_SECONDS = 10


def clean_location(location: tuple[Any, ...] | list[Any]) -> list[Any]:
    if location[:1] in (("header",), ["header"]):
        return list(location[:2])  # a header's name (e.g. Idempotency-Key) is the field, though no identifier
    # Union members and validators appear as labels like `constrained-int` or `function-after[…]`: not fields.
    parts = [part for part in location if isinstance(part, int) or str(part).isidentifier()]
    if parts and parts[0] == "body":
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in UNION_FIELDS and parts[1] in JOB_KINDS:
        del parts[1]
    return parts


def describe_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    described = []
    for error in errors:
        location = clean_location(error["loc"])
        # Spec keys and choices get a suggestion, as the CLI gives them (other bodies are written by programs).
        hint = did_you_mean(error) if location[:1] == ["spec"] else ""
        described.append({"loc": location, "msg": error_message(error) + hint, "type": error["type"]})
    return described


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=HTTP_UNPROCESSABLE,
                        content={"detail": describe_errors(list(exc.errors()))})


async def database_error_handler(request: Request, exc: Exception) -> JSONResponse:
    failure = classify(exc)
    if failure is None:
        raise exc  # not a condition of the database: the server's error middleware logs it as the bug it is
    where = f"{request.method} {request.url.path}"
    remember_failure(request, failure)
    if failure is DatabaseFailure.disk_full:
        log.error("%s: %s; nothing of this request was stored", where, failure.value)
        detail = (f"{failure.value}: nothing of this request was stored, and what was stored before is intact; "
                  "the server's administrator must free space on the database's volume")
        return JSONResponse({"detail": detail}, status.HTTP_507_INSUFFICIENT_STORAGE)
    retry_after = OUTAGE_RETRY_AFTER_SECONDS if failure.is_outage else DATABASE_RETRY_AFTER_SECONDS
    (log.error if failure.is_outage else log.warning)("%s: %s; answered 503", where, failure.value)
    return JSONResponse({"detail": f"{failure.value}; retry in {retry_after} s"},
                        status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": str(retry_after)})


def remember_failure(request: Request, failure: DatabaseFailure) -> None:
    """Keep the failure for `/healthz` (the app's RecentFailures; absent when the handler runs alone)."""
    app = request.scope.get("app")
    recent: RecentFailures | None = getattr(getattr(app, "state", None), "recent_failures", None)
    if recent is not None:
        recent.record(failure)


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """A bug still answers JSON (clients parse `detail`); the server's error middleware logs the traceback."""
    return JSONResponse({"detail": "internal server error; the server's log has the details"},
                        status.HTTP_500_INTERNAL_SERVER_ERROR)


class LeaseConflict(HTTPException):
    """409 on a lease call; the body says the job's status next to the reason (`LeaseConflictOut`)."""

    def __init__(self, detail: str, job_status: str) -> None:
        super().__init__(status.HTTP_409_CONFLICT, detail)
        self.job_status = JobStatus(job_status)


async def lease_conflict_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, LeaseConflict)
    body = LeaseConflictOut(detail=exc.detail, job_status=exc.job_status)
    return JSONResponse(status_code=exc.status_code, content=body.model_dump(mode="json"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(DBAPIError, database_error_handler)
    app.add_exception_handler(PoolTimeoutError, database_error_handler)
    app.add_exception_handler(DatabaseCondition, database_error_handler)
    app.add_exception_handler(LeaseConflict, lease_conflict_handler)
    app.add_exception_handler(Exception, internal_error_handler)
