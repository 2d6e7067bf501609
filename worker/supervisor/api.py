"""The worker's httpx client for the worker endpoints: register, claim a lease, heartbeat, report.

The lease token travels only in request bodies, never in a URL (URLs end up in access logs). A 409 on
any lease call means this worker does not hold the job's lease now: that is `LeaseLost`, with the job's
status the server sent along. A job that ended (succeeded, failed, cancelled) is over for this worker;
a job another worker's lease holds is not: this worker's result, if it comes first, is still taken.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from padbench.contract.api import (
    API_PREFIX,
    Capabilities,
    Heartbeat,
    HeartbeatAck,
    JobStatus,
    LeaseCancelled,
    LeaseComplete,
    LeaseConflictOut,
    LeaseFail,
    LeaseOut,
    LeaseRelease,
    LeaseRequest,
    WorkerOut,
    WorkerRegister,
)
from padbench.contract.bounds import MAX_MESSAGE_LENGTH
from padbench.contract.gangs import GangBeat, GangComplete, GangJoin, GangJoined, GangLeave, GangState
from padbench.http import ApiError, ApiSession, error_from_response, parse_body

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
    """The server answered 409 to a lease call: the job ended, or another worker's lease holds it now.

    `job_status` is the job's status as the server reported it with the 409 (None when it did not say).
    """

    def __init__(self, message: str, job_status: JobStatus | None = None) -> None:
        super().__init__(message, status=HTTP_CONFLICT)
        self.job_status = job_status

    @property
    def job_ended(self) -> bool:
        """The job succeeded, failed or was cancelled: running it on is wasted. A server that does not say
        refuses results from any lease but the current one, so an unknown status counts as ended."""
        return self.job_status is None or self.job_status.is_final


def raise_lease_lost(response: httpx.Response) -> None:
    """An httpx response hook: a 409 to a lease call raises `LeaseLost` with the job status in its body."""
    path = response.request.url.path
    if response.status_code != HTTP_CONFLICT or not path.startswith((f"{API_PREFIX}/leases/", f"{API_PREFIX}/gangs/")):
        return
    response.read()
    try:
        job_status: JobStatus | None = LeaseConflictOut.model_validate_json(response.content).job_status
    except ValidationError:
        job_status = None
    raise LeaseLost(str(error_from_response(response)), job_status)


class WorkerApi(ApiSession):
    # No retries inside a call: the supervisor's loops (claiming, heartbeats, reports) retry with their own
    # back-off and Retry-After, and a heartbeat thread must not hang in one call.
    default_retry_budget_s = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A hook rather than a check after the call: ApiSession's error keeps the message, not the body.
        self._http.event_hooks["response"].append(raise_lease_lost)

    def register(self, name: str, capabilities: Capabilities) -> WorkerOut:
        body = WorkerRegister(name=name, capabilities=capabilities)
        return parse_body(WorkerOut, self.request("POST", "/workers", json=body.model_dump(mode="json")))

    def claim(self, worker_id: int, gpus_free: int | None = None) -> LeaseOut | None:
        """The next job this worker can run on its `gpus_free` free GPUs (None: all it owns), or None when
        the queue has nothing for it (204)."""
        body = LeaseRequest(worker_id=worker_id, gpus_free=gpus_free).model_dump(mode="json", exclude_none=True)
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

    def join_gang(self, worker_id: int, address: str, port: int, gpus_free: int | None = None) -> GangJoined | None:
        """Join a job across several workers that this worker can run on its `gpus_free` GPUs; None when the
        queue has none (204). `address` and `port` host the gang's rendezvous if this worker is node 0."""
        body = GangJoin(worker_id=worker_id, gpus_free=gpus_free, address=address, port=port)
        response = self.request("POST", "/gangs", json=body.model_dump(mode="json", exclude_none=True))
        if response.status_code == HTTP_NO_CONTENT:
            return None
        return parse_body(GangJoined, response)

    def beat_gang(self, job_id: int, member_token: str, progress: float | None = None,
                  message: str | None = None) -> GangState:
        """Beat the membership, carrying the job's progress from the node that runs global rank 0; `LeaseLost`
        (409) when it ended."""
        shown = None if message is None else storable(message, MAX_MESSAGE_LENGTH)
        body = GangBeat(member_token=member_token, progress=progress, message=shown).model_dump(mode="json")
        return parse_body(GangState, self.request("POST", f"/gangs/{job_id}/beat", json=body))

    def complete_gang(self, job_id: int, member_token: str, result: dict[str, Any]) -> None:
        """The job's result, from the member whose node ran global rank 0."""
        body = GangComplete.model_validate({"member_token": member_token, "result": result})
        self.request("POST", f"/gangs/{job_id}/complete", json=body.model_dump(mode="json"))

    def leave_gang(self, job_id: int, member_token: str) -> None:
        body = GangLeave(member_token=member_token).model_dump(mode="json")
        self.request("POST", f"/gangs/{job_id}/leave", json=body)

    def _lease_call(self, job_id: int, action: str, body: dict[str, Any]) -> Any:
        """POST a lease call; a 409 raises `LeaseLost` (see `raise_lease_lost`)."""
        return self.request("POST", f"/leases/{job_id}/{action}", json=body)
