"""Workers that die or are stopped: a SIGKILLed worker's lease expires and another worker finishes the job;
a SIGTERMed worker releases its lease, stops its child and exits 0."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from padbench.contract.api import JobStatus
from tests.acceptance.conftest import LiveServer, Worker, process_gone
from tests.acceptance.specs import LONG, QUICK

pytestmark = pytest.mark.slow

# Long enough to be caught running, short enough to finish quickly on the second worker.
MEDIUM = QUICK | {"name": "acceptance-medium",
                  "measurement": QUICK["measurement"] | {"min_seconds": 4, "max_batches": None}}


@pytest.fixture
def server_env() -> dict[str, str]:
    return {"PADBENCH_LEASE_SECONDS": "5", "PADBENCH_LEASE_GRACE_SECONDS": "2", "PADBENCH_REAPER_INTERVAL_SECONDS": "1"}


def wait_until(condition: Callable[[], bool], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def running_on(server: LiveServer, job_id: int, workers: list[Worker]) -> tuple[Worker, int]:
    """Wait until one of `workers` runs the job and reports progress: that worker and its job child's pid."""
    job = server.wait_for(job_id, lambda j: j.status is JobStatus.running and j.progress is not None)
    (worker,) = [worker for worker in workers if worker.name == job.worker]
    children = worker.job_children()
    assert len(children) == 1
    return worker, children[0]


def test_a_sigkilled_workers_job_is_finished_by_another(live_server: LiveServer, start_worker) -> None:
    workers = [start_worker("first"), start_worker("second")]  # started together: start-up is the slow part
    with live_server.client() as client:
        job_id = client.submit(MEDIUM).id
        victim, child = running_on(live_server, job_id, workers)
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=10)
        wait_until(lambda: process_gone(child))  # no orphan keeps computing on the device
        job = client.wait(job_id, poll_s=0.2, timeout_s=150)
    (survivor,) = [worker for worker in workers if worker is not victim]
    assert job.status is JobStatus.succeeded, job.error
    assert job.worker == survivor.name
    assert job.attempts == 2


def test_sigterm_releases_the_lease_and_stops_the_child(live_server: LiveServer, start_worker) -> None:
    worker = start_worker("stopping")
    with live_server.client() as client:
        job_id = client.submit(LONG).id
        _, child = running_on(live_server, job_id, [worker])
        os.kill(worker.process.pid, signal.SIGTERM)
        assert worker.process.wait(timeout=30) == 0
        job = client.job(job_id)
        assert job.status is JobStatus.queued  # back in the queue at once, not after the lease expires
        assert job.attempts == 0  # a graceful stop is not the job's fault
        assert process_gone(child)
        assert "releasing the lease" in worker.log_text()
        client.cancel(job_id)
