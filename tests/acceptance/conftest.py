"""Real processes on loopback: a `padbench server` subprocess per test and `padbench worker` subprocesses.

Each test gets its own server (its own SQLite file and generated tokens), so no job from one test can be
claimed by a worker of the next. Every process started here is stopped at teardown, and a worker's job
child — which lives in its own session — is killed with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from padbench.client.api import PadbenchClient
from padbench.client.demo import Tokens, background, free_loopback_port, padbench_command, wait_until_healthy
from padbench.contract.api import JobOut


@dataclass
class LiveServer:
    url: str
    tokens: Tokens
    workdir: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    workers: list[Worker] = field(default_factory=list)

    def client(self) -> PadbenchClient:
        return PadbenchClient(self.url, self.tokens.submitter)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `padbench ARGS` as a subprocess, configured through PADBENCH_SERVER / PADBENCH_TOKEN."""
        env = self.env | {"PADBENCH_SERVER": self.url, "PADBENCH_TOKEN": self.tokens.submitter}
        return subprocess.run(padbench_command(*args), env=env, capture_output=True, text=True, timeout=timeout)

    # Generous: the wait ends as soon as the job gets there, and on a busy two-core machine a job's child has
    # taken over 90 s to report progress (importing torch and building the model beside the test suite).
    def wait_for(self, job_id: int, condition: Callable[[JobOut], bool], timeout_s: float = 240) -> JobOut:
        deadline = time.monotonic() + timeout_s
        with self.client() as client:
            while True:
                job = client.job(job_id)
                if condition(job):
                    return job
                if time.monotonic() > deadline:
                    raise AssertionError(f"job {job_id} never reached the expected state; last seen: {job}")
                time.sleep(0.1)


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def job_children(self) -> list[int]:
        """Pids of this worker's spawned job children (multiprocessing `spawn_main` processes)."""
        return [pid for pid in children_of(self.process.pid) if b"spawn_main" in read_proc(pid, "cmdline")]

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def read_proc(pid: int, name: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


def children_of(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = read_proc(int(entry.name), "stat").decode(errors="replace")
            # Field 4 is the parent pid; the command name in field 2 may contain spaces, so split after ')'.
            if stat and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(entry.name))
    return found


def process_gone(pid: int) -> bool:
    state = read_proc(pid, "stat").decode(errors="replace")
    return not state or state.rsplit(")", 1)[1].split()[0] == "Z"


def kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@contextmanager
def running_server(workdir: Path, extra_env: dict[str, str]) -> Iterator[LiveServer]:
    tokens = Tokens.generate()
    tokens.write(workdir / "tokens")
    port = free_loopback_port()
    url = f"http://127.0.0.1:{port}"
    # One server process whatever the host's cores: the tests freeze and kill "the server" by its pid, and
    # the processes of `--workers N` would go on serving without their parent.
    env = os.environ | {"PADBENCH_TOKENS_FILE": str(workdir / "tokens"), "PADBENCH_SERVER_PROCESSES": "1",
                        "PADBENCH_DATABASE_URL": f"sqlite:///{workdir / 'padbench.db'}", **extra_env}
    log = workdir / "server.log"
    with background(padbench_command("server", "--host", "127.0.0.1", "--port", str(port)), log, env) as process:
        wait_until_healthy(url, process, log)
        server = LiveServer(url=url, tokens=tokens, workdir=workdir, env=env, process=process)
        try:
            yield server
        finally:
            for worker in server.workers:  # their job children live in their own sessions
                for child in worker.job_children():
                    kill_group(child)


@contextmanager
def running_worker(server: LiveServer, name: str, labels: tuple[str, ...] = ()) -> Iterator[Worker]:
    log = server.workdir / f"worker-{name}.log"
    command = padbench_command("worker", "--server", server.url, "--name", name,
                               *(option for label in labels for option in ("--label", label)))
    with background(command, log, server.env | {"PADBENCH_TOKEN": server.tokens.worker}) as process:
        worker = Worker(name=name, process=process, log=log)
        server.workers.append(worker)
        yield worker


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for a module whose tests each finish (or cancel) every job they submit."""
    with running_server(tmp_path_factory.mktemp("server"), {}) as server:
        yield server


@pytest.fixture(scope="module")
def shared_worker(shared_server: LiveServer) -> Iterator[Worker]:
    with running_worker(shared_server, "shared", labels=("acceptance", "team-a")) as worker:
        yield worker


@pytest.fixture
def server_env() -> dict[str, str]:
    """Extra PADBENCH_* settings for `live_server`; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def live_server(tmp_path: Path, server_env: dict[str, str]) -> Iterator[LiveServer]:
    with running_server(tmp_path, server_env) as server:
        yield server


@pytest.fixture
def start_worker(live_server: LiveServer) -> Iterator[Callable[[str], Worker]]:
    with ExitStack() as stack:
        yield lambda name: stack.enter_context(running_worker(live_server, name))
