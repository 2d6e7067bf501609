"""The worker's httpx client for the worker endpoints: register, claim a lease, heartbeat, report.

The lease token travels only in request bodies, never in a URL (URLs end up in access logs). A 409 on
any lease call means this worker no longer holds the lease (it expired and went to someone else, or the
job was finished elsewhere): that is `LeaseLost`, and the caller must drop the job without reporting.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.api import (
    Capabilities,
    Heartbeat,
    HeartbeatAck,
    LeaseCancelled,
    LeaseComplete,
    LeaseFail,
    LeaseOut,
    LeaseRelease,
    LeaseRequest,
    WorkerOut,
    WorkerRegister,
)
from padbench.contract.bounds import MAX_MESSAGE_LENGTH
from padbench.http import ApiError, ApiSession, parse_body

HTTP_CONFLICT = 409
HTTP_NO_CONTENT = 204


def storable(text: str, limit: int, keep_end: bool = False) -> str:
    """`text` as the server accepts it: NUL (which PostgreSQL cannot store) shown as U+FFFD, cut to `limit`.

    Child errors and progress messages quote whatever the job read, binary included; a report must not be
    refused for that.
    """
    text = text.replace("\x00", "\ufffd")
    return text[-limit:] if keep_end else text[:limit]


class LeaseLost(ApiError):
    """The server answered 409: another worker holds this job now, or it is already finished."""


class WorkerApi(ApiSession):
    # Each call retries a saturated server only briefly: the supervisor's loops (claiming, heartbeats,
    # reports) already retry with their own back-off, and a heartbeat thread must not hang in one call.
    default_retry_budget_s = 2.0

    def register(self, name: str, capabilities: Capabilities) -> WorkerOut:
        body = WorkerRegister(name=name, capabilities=capabilities)
        return parse_body(WorkerOut, self.request("POST", "/workers", json=body.model_dump(mode="json")))

    def claim(self, worker_id: int) -> LeaseOut | None:
        """The next job this worker can run, or None when the queue has nothing for it (204)."""
        body = LeaseRequest(worker_id=worker_id).model_dump(mode="json")
        response = self.request("POST", "/leases", json=body)
        if response.status_code == HTTP_NO_CONTENT:
            return None
        return parse_body(LeaseOut, response)

    def heartbeat(self, job_id: int, token: str, progress: float | None, message: str | None) -> HeartbeatAck:
        shown = None if message is None else storable(message, MAX_MESSAGE_LENGTH)
        body = Heartbeat(lease_token=token, progress=progress, message=shown)
        return parse_body(HeartbeatAck, self._lease_call(job_id, "heartbeat", body.model_dump(mode="json")))

    def complete(self, job_id: int, token: str, result: dict[str, Any]) -> None:
        # The child already produced a contract-shaped document; validating it here (pydantic, no torch)
        # turns a schema slip into a clear failure instead of a bare 422 from the server.
        body = LeaseComplete.model_validate({"lease_token": token, "result": result})
        self._lease_call(job_id, "complete", body.model_dump(mode="json"))

    def cancelled(self, job_id: int, token: str, partial_result: dict[str, Any]) -> None:
        """The job stopped on its cancel request: report the rows it finished (a result marked partial)."""
        body = LeaseCancelled.model_validate({"lease_token": token, "result": partial_result})
        self._lease_call(job_id, "cancelled", body.model_dump(mode="json"))

    def fail(self, job_id: int, token: str, error: str, traceback: str | None) -> None:
        body = LeaseFail(lease_token=token, error=storable(error, 10_000),
                         traceback=storable(traceback, 200_000, keep_end=True) if traceback else None)
        self._lease_call(job_id, "fail", body.model_dump(mode="json"))

    def release(self, job_id: int, token: str) -> None:
        self._lease_call(job_id, "release", LeaseRelease(lease_token=token).model_dump(mode="json"))

    def _lease_call(self, job_id: int, action: str, body: dict[str, Any]) -> Any:
        try:
            return self.request("POST", f"/leases/{job_id}/{action}", json=body)
        except ApiError as error:
            if error.status == HTTP_CONFLICT:
                raise LeaseLost(str(error), status=error.status) from error
            raise
