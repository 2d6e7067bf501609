"""A queued job that no live worker can run says so, over real HTTP on loopback (SQLite and PostgreSQL): the
job API and `padbench status` name what the nearest worker lacks, and the answer changes as soon as a worker
that offers it registers, which then takes the job."""

from __future__ import annotations

from typing import Any

import httpx

from padbench.client.display import format_status
from padbench.contract.api import Capabilities, JobOut
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC, claim, register, submit

GENERATE: dict[str, Any] = SPEC | {"kind": "generate", "name": "tiny-generate"}
PADDING_ONLY = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding"]).model_dump(mode="json")
GENERATE_TOO = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding", "generate"]).model_dump(mode="json")


def left_waiting(
    alice: httpx.Client, fleet: httpx.Client, spec: dict[str, Any], worker: str, capabilities: dict[str, Any]
) -> tuple[int, int, JobOut]:
    """The job submitted, a worker registered that claims nothing: (job id, worker id, the job as read)."""
    job_id = submit(alice, spec)
    worker_id = register(fleet, worker, capabilities)
    assert claim(fleet, worker_id) is None
    return job_id, worker_id, JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())


def test_a_job_no_live_worker_can_run_says_so_until_one_can(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        job_id, _, job = left_waiting(alice, fleet, GENERATE, "padding-box", PADDING_ONLY)
        assert job.waiting_reason == (
            "no live worker can run it: the live worker lacks the generate job kind, attention 'sdpa' for generate jobs"
        )
        assert "waits      no live worker can run it" in format_status(job)
        generate_box = register(fleet, "generate-box", GENERATE_TOO)
        again = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert again.waiting_reason is None  # a live worker offers everything now; it only has to ask
        lease = claim(fleet, generate_box)
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "generate-box"


GPU_SIZED: dict[str, Any] = {
    "model": "gpt2-seed",
    "attention": "sdpa",
    "data": {"num_samples": 2000},
    "name": "gpu-sized",
}  # device: auto, bf16
TWO_CORES = Capabilities(device="cpu", kernels=["sdpa"], cpu_flops_per_job=1e11 * 7200).model_dump(mode="json")
ONE_GPU = Capabilities(device="cuda", gpu_name="NVIDIA H100", kernels=["sdpa"]).model_dump(mode="json")


def test_a_gpu_sized_auto_job_is_not_claimed_by_a_cpu_worker_and_says_why(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        job_id, cpu_box, job = left_waiting(alice, fleet, GPU_SIZED, "cpu-box", TWO_CORES)
        assert job.waiting_reason is not None and "no live worker can run it" in job.waiting_reason
        assert "a GPU: on a CPU the job's work is about 1e17 FLOPs" in job.waiting_reason
        small = submit(alice, SPEC | {"device": "auto", "name": "small-auto"})  # fp32 tiny: within reach
        lease = claim(fleet, cpu_box)
        assert lease is not None and lease.job.id == small
        gpu_box = register(fleet, "gpu-box", ONE_GPU)
        lease = claim(fleet, gpu_box)
        assert lease is not None and lease.job.id == job_id
