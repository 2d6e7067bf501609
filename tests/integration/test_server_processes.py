"""`padbench server --workers 2`: two real server processes on one loopback port, on SQLite and PostgreSQL.

Which process accepts a connection is the kernel's choice, so each test steers its requests: the other
process is paused (SIGSTOP) while a request is sent, and it cannot accept; resumed before uvicorn's
supervisor would miss its health ping (5 s). What one process stored, the other must then honour: the
failed authentications the limiter counts, and the job an `Idempotency-Key` created.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.integration.conftest import empty_database_url, loopback_socket, write_tokens_file
from tests.integration.test_server_jobs import SPEC

pytestmark = pytest.mark.slow
PADBENCH = [sys.executable, "-m", "padbench.cli"]
FAILURE_LIMIT = 4
ADDRESS_LIMIT = 6
STARTUP_SECONDS = 90


@dataclass
class ServerProcesses:
    base_url: str
    tokens: dict[str, str]
    parent: subprocess.Popen[bytes]
    children: list[int]

    @contextmanager
    def only(self, index: int) -> Iterator[None]:
        """Requests go to child `index`: the others are paused (they accept nothing) until the block ends."""
        others = [pid for position, pid in enumerate(self.children) if position != index]
        for pid in others:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in others:
                os.kill(pid, signal.SIGCONT)

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        return self.request("GET", path, token)

    def request(self, method: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
        """One request on a connection of its own, so the process that accepts it is the one not paused."""
        headers = {"Connection": "close", **kwargs.pop("headers", {})}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)


def server_children(parent: subprocess.Popen[bytes]) -> list[int]:
    """The processes uvicorn's manager started (multiprocessing's spawn children), not its helpers."""
    children = psutil.Process(parent.pid).children()
    return [child.pid for child in children if "resource_tracker" not in " ".join(child.cmdline())]


def wait_until_serving(parent: subprocess.Popen[bytes], log: Path, processes: int) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while log.read_text(errors="replace").count("Application startup complete") < processes:
        if parent.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"padbench server --workers {processes} did not start:\n{log.read_text()}")
        time.sleep(0.1)


@contextmanager
def server_processes(database_url: str, workdir: Path, processes: int = 2) -> Iterator[ServerProcesses]:
    tokens = write_tokens_file(workdir / "tokens")
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = os.environ | {
        "PADBENCH_DATABASE_URL": database_url,
        "PADBENCH_TOKENS_FILE": str(workdir / "tokens"),
        "PADBENCH_AUTH_FAILURE_LIMIT": str(FAILURE_LIMIT),
        "PADBENCH_AUTH_FAILURE_ADDRESS_LIMIT": str(ADDRESS_LIMIT),
    }
    log = workdir / "server.log"
    command = [*PADBENCH, "server", "--port", str(port), "--workers", str(processes), "--log-level", "info"]
    with log.open("wb") as output:
        parent = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(parent, log, processes)
        children = server_children(parent)
        assert len(children) == processes, log.read_text()
        yield ServerProcesses(f"http://127.0.0.1:{port}", tokens, parent, children)
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        parent.terminate()  # SIGTERM: uvicorn's manager stops its processes and exits
        parent.wait(timeout=60)


@pytest.fixture(params=["sqlite", "postgresql"])
def two_processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcesses]:
    url = empty_database_url(request, tmp_path, "padbench.sqlite3")
    with server_processes(url, tmp_path) as servers:
        yield servers


def test_a_brute_force_spread_over_both_processes_meets_one_limit(two_processes: ServerProcesses) -> None:
    servers = two_processes
    wrong = "x" * 43
    with servers.only(0):
        first = [servers.get("/v1/jobs", wrong).status_code for _ in range(FAILURE_LIMIT - 1)]
    with servers.only(1):
        last = servers.get("/v1/jobs", wrong).status_code
        refused = servers.get("/v1/jobs", wrong)  # the other process counted the first ones
    assert [*first, last] == [401] * FAILURE_LIMIT
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    with servers.only(0):
        assert servers.get("/v1/jobs", wrong).status_code == 429


def test_the_address_limit_is_shared_and_a_valid_token_is_never_refused(two_processes: ServerProcesses) -> None:
    servers = two_processes
    for index in range(ADDRESS_LIMIT):  # each guess different, alternating between the processes
        with servers.only(index % 2):
            assert servers.get("/v1/jobs", f"guess-{index:02d}-" + "y" * 34).status_code == 401
    for index in (0, 1):
        with servers.only(index):
            assert servers.get("/v1/jobs", "a-new-guess-" + "z" * 31).status_code == 429
            assert servers.get("/v1/jobs", servers.tokens["submitter"]).status_code == 200
            assert servers.get("/metrics", servers.tokens["viewer"]).status_code == 200


def test_an_idempotency_key_retried_on_the_other_process_returns_the_same_job(
    two_processes: ServerProcesses,
) -> None:
    servers = two_processes
    token = servers.tokens["submitter"]
    key = {"Idempotency-Key": "5e1f2a3b-0000-4000-8000-000000000001"}
    with servers.only(0):
        first = servers.request("POST", "/v1/jobs", token, json={"spec": SPEC}, headers=key)
    with servers.only(1):
        retry = servers.request("POST", "/v1/jobs", token, json={"spec": SPEC}, headers=key)
        listed = servers.get("/v1/jobs", token).json()
    assert first.status_code == 201 and retry.status_code == 200
    assert retry.json()["id"] == first.json()["id"]
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert [job["id"] for job in listed["items"]] == [first.json()["id"]]


def test_every_process_answers_healthz_and_livez(two_processes: ServerProcesses) -> None:
    for index in (0, 1):
        with two_processes.only(index):
            health = two_processes.get("/healthz")
            assert health.status_code == 200 and health.json()["status"] == "ok"
            assert two_processes.get("/livez").status_code == 200
