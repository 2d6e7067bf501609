"""A server killed while a worker finishes a job: the worker keeps the result, retries the report, and the job
succeeds on its first attempt once the server is back — on SQLite and PostgreSQL, with real processes."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from padbench.client.demo import background, padbench_command, wait_until_healthy
from padbench.contract.api import JobStatus
from tests.acceptance.conftest import LiveServer, running_server, running_worker
from tests.acceptance.specs import QUICK
from tests.integration.conftest import empty_postgres, postgres_database  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow
MEDIUM = QUICK | {"name": "outage", "measurement": QUICK["measurement"] | {"min_seconds": 3, "max_batches": None}}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    if request.param == "sqlite":
        return {"PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'outage.sqlite3'}"}
    url = request.getfixturevalue("postgres_database")
    empty_postgres(url)
    return {"PADBENCH_DATABASE_URL": url}


@pytest.fixture
def server(tmp_path: Path, database_env: dict[str, str]) -> Iterator[LiveServer]:
    with running_server(tmp_path, database_env) as live:
        yield live


def test_a_result_finished_while_the_server_is_down_is_reported_when_it_returns(server: LiveServer) -> None:
    with running_worker(server, "outage") as worker, server.client() as client:
        job_id = client.submit(MEDIUM).id
        server.wait_for(job_id, lambda job: job.status is JobStatus.running and job.progress is not None)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)
        _wait_for_log(worker.log, "reporting failed", timeout_s=120)  # the child finished; the server is down
        port = server.url.rsplit(":", 1)[1]
        command = padbench_command("server", "--host", "127.0.0.1", "--port", port)
        with background(command, server.workdir / "server-again.log", server.env) as again:
            wait_until_healthy(server.url, again, server.workdir / "server-again.log")
            job = client.wait(job_id, poll_s=0.2, timeout_s=120)
            assert job.status is JobStatus.succeeded, job.error
            assert job.attempts == 1  # nothing was run twice
            assert client.results(job_id).kind == "padding"


def _wait_for_log(log: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(encoding="utf-8", errors="replace"):
        assert time.monotonic() < deadline, f"{log.name} never said {text!r}"
        time.sleep(0.2)
