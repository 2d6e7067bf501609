"""A job's `gpu:` over real HTTP on loopback: the server leases it only to a worker whose advertised GPU name
contains that text, in any case, and `padbench status` says what the queued job waits for."""

from __future__ import annotations

from typing import Any

from padbench.client.display import format_status
from padbench.contract.api import Capabilities, JobOut
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import CPU, SPEC, claim, register, submit

H100 = Capabilities(device="cuda", gpu_name="NVIDIA H100 80GB HBM3", kernels=["sdpa"]).model_dump(mode="json")
A100 = Capabilities(device="cuda", gpu_name="NVIDIA A100-SXM4-80GB", kernels=["sdpa"]).model_dump(mode="json")
ON_H100: dict[str, Any] = SPEC | {"gpu": "h100", "name": "on-h100"}


def test_a_gpu_job_waits_for_a_worker_with_that_gpu_and_goes_to_it(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        job_id = submit(alice, ON_H100)
        cpu, a100 = register(fleet, "cpu-box", CPU), register(fleet, "a100-box", A100)
        assert claim(fleet, cpu) is None and claim(fleet, a100) is None
        job = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert job.status.value == "queued" and job.spec["gpu"] == "h100"
        assert "needs      a worker whose GPU name contains 'h100'" in format_status(job)
        lease = claim(fleet, register(fleet, "h100-box", H100))
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "h100-box"


def test_other_workers_still_take_jobs_that_name_no_gpu(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        targeted, anywhere = submit(alice, ON_H100), submit(alice, SPEC)
        lease = claim(fleet, register(fleet, "a100-box", A100))
        assert lease is not None and lease.job.id == anywhere != targeted
        assert "needs" not in format_status(lease.job)  # running, and names no GPU


def test_a_gpu_name_that_is_blank_or_too_long_is_a_422_naming_the_field(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice:
        for gpu in ("  ", "x" * 65):
            response = alice.post("/v1/jobs", json={"spec": SPEC | {"gpu": gpu}})
            assert response.status_code == 422, response.text
            assert ["spec", "gpu"] in [item["loc"] for item in response.json()["detail"]]
