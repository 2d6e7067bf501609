"""Two real workers on one queue: every job is claimed exactly once."""

from __future__ import annotations

import re

import pytest

from padbench.contract.api import JobStatus
from tests.acceptance.conftest import LiveServer
from tests.acceptance.specs import QUICK

pytestmark = pytest.mark.slow


def test_two_workers_never_get_the_same_job(live_server: LiveServer, start_worker) -> None:
    workers = [start_worker("left"), start_worker("right")]
    with live_server.client() as client:
        job_ids = [client.submit(QUICK | {"name": f"pair-{n}"}).id for n in range(3)]
        jobs = [client.wait(job_id, poll_s=0.2, timeout_s=150) for job_id in job_ids]
    assert all(job.status is JobStatus.succeeded for job in jobs), [job.error for job in jobs]
    assert all(job.attempts == 1 for job in jobs)
    claims = [int(n) for worker in workers for n in re.findall(r"job (\d+) \(padding\) claimed", worker.log_text())]
    assert sorted(claims) == sorted(job_ids)
