"""A server that stops answering for longer than a lease (here frozen with SIGSTOP) does not hand the running
job to an idle worker when it comes back: the lease is missed by less than PADBENCH_LEASE_GRACE_SECONDS, the
holder's next heartbeat extends it, and the job finishes on its first attempt on its first worker.
Real processes: a `padbench server` and two `padbench worker`s."""

from __future__ import annotations

import signal
import time

import pytest

from padbench.contract.api import JobStatus
from tests.acceptance.conftest import LiveServer
from tests.acceptance.specs import QUICK

pytestmark = pytest.mark.slow
LEASE_S = 5
# Still running after the outage: the holder must beat again, not just report a result.
LONGER = QUICK | {"name": "outlives-the-outage",
                  "measurement": QUICK["measurement"] | {"min_seconds": 12, "max_batches": None}}


@pytest.fixture
def server_env() -> dict[str, str]:
    return {"PADBENCH_LEASE_SECONDS": str(LEASE_S), "PADBENCH_LEASE_GRACE_SECONDS": "60",
            "PADBENCH_REAPER_INTERVAL_SECONDS": "1"}


def test_an_outage_longer_than_the_lease_does_not_run_the_job_twice(live_server: LiveServer, start_worker) -> None:
    workers = [start_worker("first"), start_worker("second")]
    with live_server.client() as client:
        job_id = client.submit(LONGER).id
        holder = live_server.wait_for(job_id, lambda j: j.status is JobStatus.running and j.progress is not None)
        live_server.process.send_signal(signal.SIGSTOP)  # nobody hears the holder's beats: its lease runs out
        try:
            time.sleep(LEASE_S + 3)
        finally:
            live_server.process.send_signal(signal.SIGCONT)
        job = client.wait(job_id, poll_s=0.2, timeout_s=150)
    assert job.status is JobStatus.succeeded, job.error
    assert (job.attempts, job.worker) == (1, holder.worker)
    idle = next(worker for worker in workers if worker.name != holder.worker)
    assert f"job {job_id}" not in idle.log_text()  # the idle worker never ran it
