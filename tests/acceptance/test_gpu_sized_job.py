"""A `device: auto` job sized for a GPU, submitted to a service whose only worker is a CPU: the worker never
claims it (it takes the small job queued after it), and `padbench status` says why, with the estimate.
Real processes: a `padbench server` and a `padbench worker` on this machine's CPU."""

from __future__ import annotations

from typing import Any

import pytest

from padbench.contract.api import JobStatus
from tests.acceptance.conftest import LiveServer
from tests.acceptance.specs import QUICK

pytestmark = pytest.mark.slow
# bf16 gpt2-seed over 2,000 sequences, as `padbench init --gpu` writes it: days on a CPU.
GPU_SIZED: dict[str, Any] = {
    "name": "gpu-sized",
    "model": "gpt2-seed",
    "attention": "sdpa",
    "dtype": "bf16",
    "device": "auto",
    "data": {"num_samples": 2000},
}


def test_a_cpu_worker_leaves_a_gpu_sized_auto_job_and_status_says_why(live_server: LiveServer, start_worker) -> None:
    worker = start_worker("cpu-only")
    with live_server.client() as client:
        big = client.submit(GPU_SIZED).id
        small = client.submit(QUICK).id  # queued after it: the worker passes over the big one
        done = client.wait(small, poll_s=0.2, timeout_s=180)
        assert done.status is JobStatus.succeeded, done.error
        waiting = client.job(big)
    assert waiting.status is JobStatus.queued and waiting.worker is None
    assert waiting.waiting_reason is not None and waiting.waiting_reason.startswith("no live worker can run it")
    assert "a GPU: on a CPU the job's work is about 1e17 FLOPs" in waiting.waiting_reason
    status = live_server.cli("status", str(big))
    assert status.returncode == 0 and "no live worker can run it" in status.stdout
    assert f"job {big}" not in worker.log_text()
