"""The job lifecycle over real HTTP on loopback: submit → claim → heartbeat → complete → results, on SQLite
and PostgreSQL; ownership, pagination and filters, cancel, late results from a reclaimed lease, capability gating.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from padbench.contract.api import Capabilities, JobOut, JobPage, LeaseOut
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from tests.integration.conftest import LiveServer, expire_lease, result_document, serve

SPEC: dict[str, Any] = {"device": "cpu", "dtype": "fp32", "attention": "sdpa", "name": "tiny-cpu"}
CPU = Capabilities(device="cpu", kernels=["eager", "sdpa", "sdpa-block-mask"]).model_dump(mode="json")


def submit(http: httpx.Client, spec: dict[str, Any] = SPEC) -> int:
    response = http.post("/v1/jobs", json={"spec": spec})
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "queued"
    return response.json()["id"]


def register(http: httpx.Client, name: str, capabilities: dict[str, Any] = CPU) -> int:
    response = http.post("/v1/workers", json={"name": name, "capabilities": capabilities})
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def claim(http: httpx.Client, worker_id: int) -> LeaseOut | None:
    response = http.post("/v1/leases", json={"worker_id": worker_id})
    assert response.status_code in (200, 204), response.text
    return None if response.status_code == 204 else LeaseOut.model_validate(response.json())


def test_submit_claim_heartbeat_complete_results(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as gpu:
        job_id = submit(user, SPEC)
        assert user.get(f"/v1/jobs/{job_id}/results").status_code == 404
        lease = claim(gpu, register(gpu, "box-1"))
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "box-1"
        beat = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": lease.lease_token,
                                                                 "progress": 0.5, "message": "static"})
        assert beat.status_code == 200 and beat.json()["cancel_requested"] is False
        running = JobOut.model_validate(user.get(f"/v1/jobs/{job_id}").json())
        assert (running.status, running.progress, running.progress_message, running.attempts) == (
            "running", 0.5, "static", 1)
        document = result_document(SPEC)
        done = gpu.post(f"/v1/leases/{job_id}/complete", json={"lease_token": lease.lease_token, "result": document})
        assert done.status_code == 204, done.text
        finished = JobOut.model_validate(user.get(f"/v1/jobs/{job_id}").json())
        assert finished.status == "succeeded" and finished.finished_at >= finished.started_at
        stored = user.get(f"/v1/jobs/{job_id}/results")
        assert stored.status_code == 200
        assert JOB_RESULT_ADAPTER.validate_python(stored.json()).model_dump(mode="json") == document


def test_after_a_reclaim_the_first_result_wins_and_the_other_attempt_is_told(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        job_id = submit(user)
        slow = claim(gpu, register(gpu, "slow"))
        expire_lease(live_server.database, job_id)
        fast = claim(gpu, register(gpu, "fast"))  # the claim reaps the expired lease first
        assert fast is not None and fast.job.id == job_id and fast.job.attempts == 2
        taken = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": slow.lease_token})
        assert taken.status_code == 409 and taken.json()["job_status"] == "running"  # lease lost: its run stops
        body = {"lease_token": slow.lease_token, "result": result_document(SPEC)}
        assert gpu.post(f"/v1/leases/{job_id}/complete", json=body).status_code == 204  # the first result
        assert gpu.post(f"/v1/leases/{job_id}/complete", json=body).status_code == 204  # its retry: same answer
        ended = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": fast.lease_token})
        assert ended.status_code == 409 and ended.json()["job_status"] == "succeeded"  # stop: the job is done
        second = gpu.post(f"/v1/leases/{job_id}/complete", json={**body, "lease_token": fast.lease_token})
        assert second.status_code == 409 and second.json()["job_status"] == "succeeded"
        assert "already has a result from another attempt" in second.json()["detail"]
        job = JobOut.model_validate(user.get(f"/v1/jobs/{job_id}").json())
        assert (job.status, job.worker, job.attempts) == ("succeeded", "slow", 2)


def test_lease_calls_on_a_missing_job_are_404(live_server: LiveServer) -> None:
    with live_server.client("worker") as gpu:
        assert gpu.post("/v1/leases/999/heartbeat", json={"lease_token": "x"}).status_code == 404


def test_result_of_the_wrong_kind_is_422(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        job_id = submit(user)
        lease = claim(gpu, register(gpu, "w"))
        sweep_result = result_document({"kind": "attention", "device": "cpu"})
        response = gpu.post(f"/v1/leases/{job_id}/complete", json={"lease_token": lease.lease_token,
                                                                   "result": sweep_result})
        assert response.status_code == 422 and response.json()["detail"].startswith("result.kind")


def test_fail_records_the_error(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        job_id = submit(user)
        lease = claim(gpu, register(gpu, "w"))
        failure = {"lease_token": lease.lease_token, "error": "ValueError: bad", "traceback": "Traceback …"}
        assert gpu.post(f"/v1/leases/{job_id}/fail", json=failure).status_code == 204
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["status"], job["error"]) == ("failed", "ValueError: bad")


def test_cancel_queued_and_running(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        queued, running = submit(user), submit(user)
        worker_id = register(gpu, "w")
        assert user.post(f"/v1/jobs/{queued}/cancel").json()["status"] == "cancelled"
        lease = claim(gpu, worker_id)
        assert lease.job.id == running  # the cancelled job is never handed out
        cancel = user.post(f"/v1/jobs/{running}/cancel").json()
        assert (cancel["status"], cancel["cancel_requested"]) == ("running", True)
        beat = gpu.post(f"/v1/leases/{running}/heartbeat", json={"lease_token": lease.lease_token})
        assert beat.json()["cancel_requested"] is True
        assert gpu.post(f"/v1/leases/{running}/release", json={"lease_token": lease.lease_token}).status_code == 204
        assert user.get(f"/v1/jobs/{running}").json()["status"] == "cancelled"
        again = user.post(f"/v1/jobs/{running}/cancel")
        assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_submitters_see_and_cancel_only_their_own_jobs(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice, live_server.client("submitter2") as bob, \
            live_server.client("admin") as admin:
        job_id = submit(alice)
        assert bob.get(f"/v1/jobs/{job_id}").status_code == 404
        assert bob.post(f"/v1/jobs/{job_id}/cancel").status_code == 404
        assert bob.get("/v1/jobs").json()["total"] == 0
        assert admin.get(f"/v1/jobs/{job_id}").json()["submitter"] == "alice"
        assert admin.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"


def test_pagination_and_status_filter(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        ids = [submit(user) for _ in range(5)]
        user.post(f"/v1/jobs/{ids[0]}/cancel")
        page = JobPage.model_validate(user.get("/v1/jobs", params={"limit": 2, "offset": 1}).json())
        assert (page.total, page.limit, page.offset) == (5, 2, 1)
        assert [job.id for job in page.items] == [ids[3], ids[2]]  # newest first
        queued = JobPage.model_validate(user.get("/v1/jobs", params={"status": "queued"}).json())
        assert queued.total == 4 and all(job.status == "queued" for job in queued.items)
        cancelled = user.get("/v1/jobs", params={"status": "cancelled"}).json()
        assert [job["id"] for job in cancelled["items"]] == [ids[0]]
        bad = user.get("/v1/jobs", params={"status": "done", "limit": 0})
        assert bad.status_code == 422
        assert {tuple(error["loc"]) for error in bad.json()["detail"]} == {("query", "status"), ("query", "limit")}


def test_a_worker_without_the_experts_implementation_gets_204(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        submit(user, {"model": "tiny-olmoe", "dtype": "fp32", "attention": "sdpa", "experts": ["grouped_mm", "eager"]})
        eager_only = Capabilities(device="cpu", kernels=["sdpa"], experts=["eager"]).model_dump(mode="json")
        assert claim(gpu, register(gpu, "old-torch", eager_only)) is None
        both = Capabilities(device="cpu", kernels=["sdpa"], experts=["eager", "grouped_mm"]).model_dump(mode="json")
        assert claim(gpu, register(gpu, "new-torch", both)) is not None


def test_a_worker_without_the_kernels_gets_204(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        submit(user, {"dtype": "bf16", "attention": "flash"})
        assert claim(gpu, register(gpu, "cpu-only")) is None
        flash = Capabilities(device="cuda", kernels=["torch-flash", "torch-flash-varlen"]).model_dump(mode="json")
        assert claim(gpu, register(gpu, "h100", flash)) is not None


def test_worker_registration_is_idempotent_per_token_and_names_are_owned(live_server: LiveServer) -> None:
    with live_server.client("worker") as gpu, live_server.client("worker2") as other:
        first = gpu.post("/v1/workers", json={"name": "box", "capabilities": CPU})
        again = gpu.post("/v1/workers", json={"name": "box", "capabilities": CPU})
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["id"] == again.json()["id"]
        taken = other.post("/v1/workers", json={"name": "box", "capabilities": CPU})
        assert taken.status_code == 409
        assert other.post("/v1/leases", json={"worker_id": first.json()["id"]}).status_code == 403
        assert other.post("/v1/leases", json={"worker_id": 12345}).status_code == 404


def test_concurrent_workers_over_http_never_share_a_job(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user:
        job_ids = {submit(user) for _ in range(20)}

    def drain(name: str) -> list[int]:
        with any_live_server.client("worker") as gpu:
            worker_id = register(gpu, name)
            claimed = []
            while (lease := claim(gpu, worker_id)) is not None:
                claimed.append(lease.job.id)
            return claimed

    with ThreadPoolExecutor(max_workers=6) as pool:
        per_worker = list(pool.map(drain, [f"w{index}" for index in range(6)]))
    everything = [job_id for claimed in per_worker for job_id in claimed]
    assert sorted(everything) == sorted(job_ids)


def test_the_background_reaper_requeues_expired_leases_without_a_claim(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, reaper_interval_seconds=0.1) as server, \
            server.client("submitter") as user, server.client("worker") as gpu:
        job_id = submit(user)
        claim(gpu, register(gpu, "w"))
        expire_lease(server.database, job_id)
        deadline = time.monotonic() + 10
        while user.get(f"/v1/jobs/{job_id}").json()["status"] != "queued":
            assert time.monotonic() < deadline, "the reaper never requeued the expired lease"
            time.sleep(0.05)
