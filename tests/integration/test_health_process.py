"""`padbench server --health-port`: a process of its own answers `/healthz` and `/livez` for the API, on a port
of its own. It names an API process whose event loop stopped, ends with a server killed outright, and a server
whose health port is taken does not start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from padbench.client.demo import free_loopback_port, padbench_command
from tests.acceptance.conftest import LiveServer, running_server

pytestmark = pytest.mark.slow
STALL_S = 2


@pytest.fixture
def health_port() -> int:
    return free_loopback_port()


@pytest.fixture
def server(tmp_path: Path, health_port: int) -> Iterator[LiveServer]:
    env = {"PADBENCH_HEALTH_PORT": str(health_port), "PADBENCH_HEALTH_STALL_SECONDS": str(STALL_S)}
    with running_server(tmp_path, env) as live:
        yield live


def get(port: int, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5)


def wait_for(port: int, path: str, status: int, within_s: float) -> httpx.Response:
    deadline = time.monotonic() + within_s
    while True:
        response = get(port, path)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_the_health_port_answers_for_the_api_and_names_a_process_that_hangs(server: LiveServer,
                                                                            health_port: int) -> None:
    assert get(health_port, "/livez").json() == {"status": "ok"}
    healthz = get(health_port, "/healthz")
    assert healthz.status_code == 200 and healthz.json()["database_write"] == "ok", healthz.text
    assert get(health_port, "/v1/jobs").status_code == 404  # it serves the probes and nothing else
    os.kill(server.process.pid, signal.SIGSTOP)  # one API process: the server's own
    try:
        stalled = wait_for(health_port, "/livez", 503, within_s=STALL_S + 5)
        assert stalled.status_code == 503, stalled.text
        assert f"API process {server.process.pid}: its event loop has not run for" in stalled.json()["detail"]
        assert stalled.headers["Retry-After"]
        assert get(health_port, "/healthz").status_code == 503
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    assert wait_for(health_port, "/livez", 200, within_s=5).status_code == 200


def api_processes(server_pid: int, count: int, within_s: float = 60) -> list[int]:
    """The API processes of a server started with --workers, found by their beats (their parent: the server)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = [int(path.stem.removeprefix("api-"))
                for path in Path(tempfile.gettempdir()).glob("padbench-health-*/api-*.json")]
        ours = [pid for pid in pids if parent_of(pid) == server_pid]
        if len(ours) == count:
            return sorted(ours)
        time.sleep(0.2)
    pytest.fail(f"the server's {count} API processes never beat")


def parent_of(pid: int) -> int | None:
    try:
        # /proc/PID/stat: `pid (comm) state ppid ...`; comm may hold spaces, so split after its closing bracket
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_with_several_api_processes_the_one_that_hangs_is_named(tmp_path: Path, health_port: int) -> None:
    env = {"PADBENCH_HEALTH_PORT": str(health_port), "PADBENCH_HEALTH_STALL_SECONDS": str(STALL_S),
           "PADBENCH_SERVER_PROCESSES": "2"}
    with running_server(tmp_path, env) as server:
        first, second = api_processes(server.process.pid, count=2)
        assert wait_for(health_port, "/livez", 200, within_s=5).status_code == 200
        os.kill(second, signal.SIGSTOP)
        try:
            stalled = wait_for(health_port, "/livez", 503, within_s=STALL_S + 5)
            assert f"API process {second}:" in stalled.json()["detail"], stalled.text
            assert f"API process {first}:" not in stalled.json()["detail"]
        finally:
            os.kill(second, signal.SIGCONT)
        assert wait_for(health_port, "/livez", 200, within_s=5).status_code == 200


def test_the_health_process_ends_with_a_server_killed_outright(server: LiveServer, health_port: int) -> None:
    assert get(health_port, "/livez").status_code == 200
    server.process.kill()
    server.process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", health_port), timeout=0.5).close()
        except OSError:
            return
        time.sleep(0.2)
    pytest.fail(f"the health process still listens on port {health_port} after its server was killed")


def test_a_server_whose_health_port_is_taken_does_not_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = os.environ | {"PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'padbench.db'}"}
        ended = subprocess.run(padbench_command("server", "--dev", "--port", str(free_loopback_port()),
                                                "--health-port", str(port)),
                               env=env, capture_output=True, text=True, timeout=120)
    assert ended.returncode == 1, ended.stderr
    assert f"port {port} (PADBENCH_HEALTH_PORT) on 127.0.0.1 cannot be served" in ended.stderr, ended.stderr
    assert "Traceback" not in ended.stderr
