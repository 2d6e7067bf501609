"""The worker's HTTP client (`padbench.worker.supervisor.api`) against a live server: leases, fencing, release."""

from __future__ import annotations

import pytest

from padbench.contract.api import Capabilities
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from tests.integration.conftest import LiveServer, result_document

SPEC = {"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "sdpa"}


@pytest.fixture
def worker_api(any_live_server: LiveServer) -> WorkerApi:
    return WorkerApi(any_live_server.base_url, any_live_server.tokens["worker"])


def submit(server: LiveServer) -> int:
    with server.client("submitter") as http:
        return http.post("/v1/jobs", json={"spec": SPEC}).raise_for_status().json()["id"]


def test_claim_heartbeat_complete_and_stale_tokens(any_live_server: LiveServer, worker_api: WorkerApi) -> None:
    worker = worker_api.register("api-test", Capabilities(device="cpu", kernels=["sdpa"]))
    assert worker_api.claim(worker.id) is None  # empty queue: 204
    job_id = submit(any_live_server)
    lease = worker_api.claim(worker.id)
    assert lease is not None and lease.job.id == job_id and lease.job.attempts == 1
    ack = worker_api.heartbeat(job_id, lease.lease_token, 0.25, "warming up")
    assert ack.cancel_requested is False
    with pytest.raises(LeaseLost):
        worker_api.heartbeat(job_id, "a-token-that-is-not-the-lease", None, None)
    worker_api.complete(job_id, lease.lease_token, result_document(lease.job.spec))
    with pytest.raises(LeaseLost):  # a zombie's second report changes nothing
        worker_api.complete(job_id, lease.lease_token, result_document(lease.job.spec))


def test_cancel_is_seen_on_the_heartbeat_and_release_requeues(any_live_server: LiveServer,
                                                              worker_api: WorkerApi) -> None:
    worker = worker_api.register("api-test", Capabilities(device="cpu", kernels=["sdpa"]))
    first, second = submit(any_live_server), submit(any_live_server)
    lease = worker_api.claim(worker.id)
    assert lease is not None and lease.job.id == first
    worker_api.release(first, lease.lease_token)
    again = worker_api.claim(worker.id)
    assert again is not None and again.job.id == first and again.job.attempts == 1
    with any_live_server.client("submitter") as http:
        http.post(f"/v1/jobs/{first}/cancel").raise_for_status()
    assert worker_api.heartbeat(first, again.lease_token, None, None).cancel_requested
    worker_api.fail(first, again.lease_token, "cancelled on request", None)
    with any_live_server.client("submitter") as http:
        assert http.get(f"/v1/jobs/{first}").json()["status"] == "cancelled"
    assert worker_api.claim(worker.id).job.id == second
