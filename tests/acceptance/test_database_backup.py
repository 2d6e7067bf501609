"""`padbench db backup` while jobs are being submitted, `padbench db restore` into a fresh server: every job
acknowledged before the backup began, and every result, reads back byte for byte over the API; a job
acknowledged while the backup ran is either all there or absent, never half. Real processes: two
`padbench server`s and the `padbench db` commands; a worker's lease calls are made over HTTP."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from padbench.client.demo import padbench_command
from tests.acceptance.conftest import LiveServer, running_server
from tests.integration.conftest import result_document

pytestmark = pytest.mark.slow
SPEC: dict[str, Any] = {"device": "cpu", "dtype": "fp32", "attention": "sdpa", "name": "backed-up"}
CPU = {"device": "cpu", "kernels": ["sdpa"], "job_kinds": ["padding"]}
FINISHED_JOBS = 8
QUEUED_JOBS = 8


def http(server: LiveServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def submit(user: httpx.Client) -> int:
    response = user.post("/v1/jobs", json={"spec": SPEC})
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def finish_jobs(server: LiveServer, count: int) -> None:
    """Submit `count` jobs and run each through a lease to a stored result, as a worker would."""
    with http(server, server.tokens.submitter) as user, http(server, server.tokens.worker) as worker:
        for _ in range(count):
            submit(user)
        worker_id = worker.post("/v1/workers", json={"name": "box", "capabilities": CPU}).json()["id"]
        for _ in range(count):
            lease = worker.post("/v1/leases", json={"worker_id": worker_id}).json()
            done = worker.post(f"/v1/leases/{lease['job']['id']}/complete",
                               json={"lease_token": lease["lease_token"], "result": result_document(SPEC)})
            assert done.status_code == 204, done.text


def read_back(server: LiveServer, job_ids: list[int]) -> dict[str, bytes]:
    """Each job's page and, where it has one, its result: the bytes the API answers."""
    bodies = {}
    with http(server, server.tokens.admin) as admin:
        for job_id in job_ids:
            for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/results"):
                response = admin.get(path)
                if response.status_code != 404:
                    assert response.status_code == 200, response.text
                    bodies[path] = response.content
    return bodies


class Submitter(threading.Thread):
    """Submits jobs back to back until stopped, noting when each was acknowledged."""

    def __init__(self, server: LiveServer) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.stop = threading.Event()
        self.acknowledged: list[tuple[float, int]] = []

    def run(self) -> None:
        with http(self.server, self.server.tokens.submitter) as user:
            while not self.stop.is_set():
                job_id = submit(user)
                self.acknowledged.append((time.monotonic(), job_id))


def padbench_db(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    finished = subprocess.run(padbench_command("db", *args), env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    return finished


def test_a_backup_under_submits_restores_every_acknowledged_job_and_result_byte_for_byte(tmp_path: Path) -> None:
    backup = tmp_path / "backups" / "padbench.sqlite3"
    (tmp_path / "live").mkdir()
    with running_server(tmp_path / "live", {}) as live:
        finish_jobs(live, FINISHED_JOBS)
        with http(live, live.tokens.submitter) as user:
            earlier = [submit(user) for _ in range(QUEUED_JOBS)]
        submitter = Submitter(live)
        submitter.start()
        while len(submitter.acknowledged) < 5:  # submits are under way
            time.sleep(0.05)
        backup_began = time.monotonic()
        padbench_db(live.env, "backup", str(backup))
        submitter.stop.set()
        submitter.join(timeout=60)
        acknowledged = list(range(1, FINISHED_JOBS + 1)) + earlier + [job for _, job in submitter.acknowledged]
        before_backup = [job for at, job in submitter.acknowledged if at < backup_began]
        on_the_live_server = read_back(live, acknowledged)

    (tmp_path / "fresh").mkdir()
    fresh_env = {"PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh' / 'restored.sqlite3'}"}
    restored = padbench_db(os.environ | fresh_env, "restore", str(backup))
    assert f"{FINISHED_JOBS} results" in restored.stdout
    with running_server(tmp_path / "fresh", fresh_env) as fresh:
        on_the_restored_server = read_back(fresh, acknowledged)

    must_be_there = [*range(1, FINISHED_JOBS + 1), *earlier, *before_backup]
    for job_id in must_be_there:
        assert on_the_restored_server[f"/v1/jobs/{job_id}"] == on_the_live_server[f"/v1/jobs/{job_id}"]
    results = [path for path in on_the_live_server if path.endswith("/results")]
    assert len(results) == FINISHED_JOBS
    assert all(on_the_restored_server[path] == on_the_live_server[path] for path in results)
    for path, body in on_the_restored_server.items():  # what the backup caught mid-submit is whole
        assert body == on_the_live_server[path], path
