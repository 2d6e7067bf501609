"""The worker's HTTP client (`padbench.worker.supervisor.api`) against a live server: leases, fencing, release,
and results reported after the lease expired."""

from __future__ import annotations

import pytest

from padbench.contract.api import Capabilities, JobOut, JobStatus
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from tests.integration.conftest import LiveServer, expire_lease, reap, result_document

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
    # A retried report (its first answer lost on the way) gets the same answer; it changes nothing.
    worker_api.complete(job_id, lease.lease_token, result_document(lease.job.spec))
    with pytest.raises(LeaseLost) as ended:
        worker_api.heartbeat(job_id, lease.lease_token, None, None)
    assert ended.value.job_status is JobStatus.succeeded and ended.value.job_ended


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


def job(server: LiveServer, job_id: int) -> JobOut:
    with server.client("submitter") as http:
        return JobOut.model_validate(http.get(f"/v1/jobs/{job_id}").raise_for_status().json())


def test_a_result_reported_after_the_lease_expired_and_was_requeued_is_kept(any_live_server: LiveServer,
                                                                           worker_api: WorkerApi) -> None:
    worker = worker_api.register("overloaded", Capabilities(device="cpu", kernels=["sdpa"]))
    job_id = submit(any_live_server)
    lease = worker_api.claim(worker.id)
    assert lease is not None
    expire_lease(any_live_server.database, job_id)  # heartbeats timed out on an overloaded server...
    assert reap(any_live_server.database) == 1  # ...and the reaper put the job back in the queue
    worker_api.complete(job_id, lease.lease_token, result_document(lease.job.spec))
    done = job(any_live_server, job_id)
    assert (done.status, done.attempts, done.worker) == (JobStatus.succeeded, 1, "overloaded")
    with any_live_server.client("submitter") as http:
        kept = http.get(f"/v1/jobs/{job_id}/results")
    assert kept.status_code == 200 and kept.json()["kind"] == "padding"
    assert worker_api.claim(worker.id) is None  # not run a second time


def test_a_heartbeat_resumes_the_lease_the_reaper_took_and_another_workers_lease_is_told_apart(
        any_live_server: LiveServer, worker_api: WorkerApi) -> None:
    slow = worker_api.register("slow", Capabilities(device="cpu", kernels=["sdpa"]))
    fast = worker_api.register("fast", Capabilities(device="cpu", kernels=["sdpa"]))
    job_id = submit(any_live_server)
    lease = worker_api.claim(slow.id)
    assert lease is not None
    expire_lease(any_live_server.database, job_id)
    reap(any_live_server.database)
    assert not worker_api.heartbeat(job_id, lease.lease_token, 0.5, "still here").cancel_requested
    resumed = job(any_live_server, job_id)
    assert (resumed.status, resumed.attempts, resumed.worker) == (JobStatus.running, 1, "slow")
    assert worker_api.claim(fast.id) is None

    expire_lease(any_live_server.database, job_id)
    taken = worker_api.claim(fast.id)  # reaps the lease, then claims the job: attempt 2
    assert taken is not None and taken.job.attempts == 2
    with pytest.raises(LeaseLost) as held:
        worker_api.heartbeat(job_id, lease.lease_token, None, None)
    assert held.value.job_status is JobStatus.running and not held.value.job_ended
