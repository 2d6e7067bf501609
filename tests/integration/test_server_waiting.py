"""A queued job that no live worker can run says so, over real HTTP on loopback (SQLite and PostgreSQL): the
job API and `padbench status` name what the nearest worker lacks, and the answer changes as soon as a worker
that offers it registers, which then takes the job."""

from __future__ import annotations

from typing import Any

from padbench.client.display import format_status
from padbench.contract.api import Capabilities, JobOut
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC, claim, register, submit

GENERATE: dict[str, Any] = SPEC | {"kind": "generate", "name": "tiny-generate"}
PADDING_ONLY = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding"]).model_dump(mode="json")
GENERATE_TOO = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding", "generate"]).model_dump(mode="json")


def test_a_job_no_live_worker_can_run_says_so_until_one_can(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        job_id = submit(alice, GENERATE)
        padding_box = register(fleet, "padding-box", PADDING_ONLY)
        assert claim(fleet, padding_box) is None
        job = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert job.waiting_reason == (
            "no live worker can run it: the live worker lacks the generate job kind, attention 'sdpa' for generate jobs"
        )
        assert "waits      no live worker can run it" in format_status(job)
        generate_box = register(fleet, "generate-box", GENERATE_TOO)
        again = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert again.waiting_reason is None  # a live worker offers everything now; it only has to ask
        lease = claim(fleet, generate_box)
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "generate-box"
