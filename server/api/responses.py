"""The error answers the `/v1` routes document in the OpenAPI schema, each described once here.

Every `/v1` route can answer 400, 401, 403, 429 and 503 (`EVERY_V1_ROUTE`, set on the `/v1` router);
a route adds the ones only it gives (`error_responses(404, 409)`), so a generated client knows every
status it must handle and what its body holds. 422 is documented by FastAPI itself.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.api import ErrorOut, LeaseConflictOut

RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before sending the request again",
                               "schema": {"type": "integer"}}}

ERROR_RESPONSES: dict[int, dict[str, Any]] = {
    400: {"description": "Not a well-formed HTTP request, or its head (request line and headers) is over 16 KiB: "
                         "answered in plain text by the HTTP server, before any route runs",
          "content": {"text/plain": {"schema": {"type": "string"}}}},
    401: {"model": ErrorOut, "description": "No bearer token, or one this server does not know",
          "headers": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}}},
    403: {"model": ErrorOut, "description": "The token's role may not call this route (a viewer submitting, say), "
                                            "or the worker or lease named belongs to another worker token"},
    404: {"model": ErrorOut, "description": "No such job, result or worker; a submitter asking for someone else's "
                                            "job gets the same answer"},
    409: {"model": ErrorOut, "description": "The job or worker is not in a state that allows this; `detail` says "
                                            "which state it is in"},
    429: {"model": ErrorOut, "description": "Too many failed authentications from this token or address",
          "headers": RETRY_AFTER},
    503: {"model": ErrorOut, "description": "The server is at its concurrency limit or its database is busy; "
                                            "nothing of the request was stored", "headers": RETRY_AFTER},
}
EVERY_V1_ROUTE = (400, 401, 403, 429, 503)
# A lease call's 409 also says the job's status, so a worker knows whether to stop its run.
LEASE_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: ERROR_RESPONSES[404],
    409: {**ERROR_RESPONSES[409], "model": LeaseConflictOut,
          "description": "Not the job's current lease (expired, taken over, or the job ended); `job_status` says "
                         "whether the job ended (stop) or another worker's lease holds it (run on)"},
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented answers for `codes`, as FastAPI's `responses=` takes them."""
    return {code: ERROR_RESPONSES[code] for code in codes}
