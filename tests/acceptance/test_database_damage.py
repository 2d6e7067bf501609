"""A `padbench server` process whose SQLite file is corrupted, or deleted, under it while a `padbench worker`
polls: `/healthz` answers 503 naming the problem, every route answers 503 JSON with Retry-After (never a
plain 500), the worker keeps retrying instead of dying, and the server logs no traceback. Real processes.
(PostgreSQL's full disk is shown by tests/integration/test_server_health.py, with the failure injected by
a trigger: a test cannot fill a real volume.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import LiveServer, running_server, running_worker
from tests.integration.test_server_database_outage import damaged_after_a_checkpoint, overwrite_header, overwrite_pages

pytestmark = pytest.mark.slow
SPEC = {"device": "cpu", "dtype": "fp32", "attention": "sdpa", "name": "stored-before-the-damage"}
DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "pages": (overwrite_pages, "the database file is corrupted"),
    "header": (overwrite_header, "the database file is not a SQLite database"),
    "deleted": (Path.unlink, "the database file was deleted or replaced"),
}


def routes(server: LiveServer) -> list[tuple[str, str, str | None]]:
    """(method, path, token) for a read, a submit, a worker's claim, the metrics and the health check."""
    tokens = server.tokens
    return [("GET", "/v1/jobs", tokens.submitter), ("POST", "/v1/jobs", tokens.submitter),
            ("POST", "/v1/leases", tokens.worker), ("GET", "/metrics", tokens.viewer), ("GET", "/healthz", None)]


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_sqlite_file_is_named_on_every_route_while_the_worker_waits(tmp_path: Path, damage: str) -> None:
    with running_server(tmp_path, {}) as server, running_worker(server, "poller") as worker:
        database_file = Path(server.env["PADBENCH_DATABASE_URL"].removeprefix("sqlite:///"))
        with server.client() as client:
            for index in range(20):
                client.submit(SPEC | {"name": f"stored-{index}", "device": "cuda"})  # no CPU worker takes them
        wait_for_line(worker.log, "registered as worker")
        do_damage, reason = DAMAGE[damage]
        damaged_after_a_checkpoint(database_file, do_damage)
        for method, path, token in routes(server):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            body = {"spec": SPEC} if path == "/v1/jobs" and method == "POST" else {"worker_id": 1}
            response = httpx.request(method, server.url + path, headers=headers, timeout=30,
                                     json=body if method == "POST" else None)
            assert response.status_code == 503, f"{method} {path}: {response.status_code} {response.text}"
            assert response.headers["content-type"] == "application/json"
            assert reason in response.json()["detail"] and int(response.headers["retry-after"]) >= 1
        wait_for_line(worker.log, f"claiming a job failed: HTTP 503: {reason}")  # it waits Retry-After, then again
        assert worker.process.poll() is None, worker.log_text()
    server_log = (tmp_path / "server.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in server_log and reason in server_log


def wait_for_line(log: Path, text: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in log.read_text(encoding="utf-8", errors="replace"):
        assert time.monotonic() < deadline, f"{log.name} never said {text!r}"
        time.sleep(0.2)
