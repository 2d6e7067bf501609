"""GPU sets over real HTTP on loopback, on SQLite and PostgreSQL: a worker registers its GPUs, claims with how
many are free and gets only a job that fits them; the worker list shows how many are busy and every job it
runs; a queued job that asks for more GPUs than any live worker owns says so in its view and in
`padbench status`. Time is faked in SQL."""

from __future__ import annotations

from typing import Any

import httpx

from padbench.client.display import format_status
from padbench.contract.api import Capabilities, GpuInfo, JobOut, LeaseOut, WorkerOut
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import register, submit
from tests.integration.test_server_workers import LONG_AGO_S, silent_since

ON_GPUS: dict[str, Any] = {"dtype": "bf16", "attention": "sdpa", "name": "on-gpus"}


def gpu_box(owned: int) -> dict[str, Any]:
    gpus = [GpuInfo(index=str(index), name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 2**30) for index in range(owned)]
    return Capabilities(device="cuda", gpu_name=gpus[0].name, gpus=gpus, kernels=["sdpa"]).model_dump(mode="json")


def claim_free(http: httpx.Client, worker_id: int, free: int) -> LeaseOut | None:
    response = http.post("/v1/leases", json={"worker_id": worker_id, "gpus_free": free})
    assert response.status_code in (200, 204), response.text
    return None if response.status_code == 204 else LeaseOut.model_validate(response.json())


def job_view(http: httpx.Client, job_id: int) -> JobOut:
    return JobOut.model_validate(http.get(f"/v1/jobs/{job_id}").json())


def test_a_claim_gets_only_a_job_its_free_gpus_fit_and_the_list_shows_them_busy(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as box, \
            any_live_server.client("viewer") as viewer:
        pair, single = submit(alice, ON_GPUS | {"gpus": 2}), submit(alice, ON_GPUS)
        worker_id = register(box, "two-gpus", gpu_box(2))
        first = claim_free(box, worker_id, free=1)
        assert first is not None and first.job.id == single  # the pair does not fit one free GPU
        assert claim_free(box, worker_id, free=1) is None
        [listed] = [WorkerOut.model_validate(item) for item in viewer.get("/v1/workers").json()]
        assert (listed.gpus_busy, listed.running_job_ids) == (1, [single])
        assert [gpu.index for gpu in listed.capabilities.gpus] == ["0", "1"]
        box.post(f"/v1/leases/{single}/release", json={"lease_token": first.lease_token})
        second = claim_free(box, worker_id, free=2)
        assert second is not None and second.job.id == pair


def test_claiming_more_free_gpus_than_the_worker_owns_is_a_422_naming_the_field(live_server: LiveServer) -> None:
    with live_server.client("worker") as box:
        worker_id = register(box, "two-gpus", gpu_box(2))
        response = box.post("/v1/leases", json={"worker_id": worker_id, "gpus_free": 3})
        assert response.status_code == 422 and response.json()["detail"].startswith("gpus_free: 3 is more than")


def test_a_job_wanting_more_gpus_than_any_live_worker_owns_says_why_it_waits(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        four = submit(alice, ON_GPUS | {"gpus": 4})
        register(fleet, "two-gpus", gpu_box(2))
        job = job_view(alice, four)
        assert job.waiting_reason == "needs 4 GPUs; the most any live worker owns is 2"
        assert "waits      needs 4 GPUs; the most any live worker owns is 2" in format_status(job)
        register(fleet, "four-gpus", gpu_box(4))
        assert job_view(alice, four).waiting_reason is None
        silent_since(any_live_server, LONG_AGO_S)  # both silent for an hour: neither counts
        assert job_view(alice, four).waiting_reason == "needs 4 GPUs; no live worker owns a GPU"
        assert job_view(alice, submit(alice, ON_GPUS)).waiting_reason is None  # one GPU or a CPU: any worker


def test_a_scaling_axis_is_claimed_only_where_its_largest_count_is_free(any_live_server: LiveServer) -> None:
    """`gpus: [1, 2, 4]` takes four GPUs at once (each count runs on them in turn): a worker with two never
    claims it, one with four free does, and holds all four while it runs."""
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet, \
            any_live_server.client("viewer") as viewer:
        job_id = submit(alice, ON_GPUS | {"gpus": [1, 2, 4]})
        small, large = register(fleet, "two-gpus", gpu_box(2)), register(fleet, "four-gpus", gpu_box(4))
        assert claim_free(fleet, small, free=2) is None
        assert claim_free(fleet, large, free=3) is None
        lease = claim_free(fleet, large, free=4)
        assert lease is not None and lease.job.id == job_id and lease.job.spec["gpus"] == [1, 2, 4]
        busy = {item["name"]: item["gpus_busy"] for item in viewer.get("/v1/workers").json()}
        assert busy == {"two-gpus": 0, "four-gpus": 4}
