"""`padbench demo`: the one command for the main job, end to end on this machine.

It starts a server (fresh tokens, an embedded SQLite database in a temporary directory) and one worker on
loopback as subprocesses, submits an example padding job — CPU-sized when the worker reports no GPU,
GPU-sized otherwise — waits with a progress bar, prints the results table, and shuts everything down, also on
Ctrl-C or failure. The subprocesses run in their own sessions so a Ctrl-C reaches only this process,
which then stops the worker (releasing its lease) before the server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

import httpx

from padbench.client.api import PadbenchClient
from padbench.client.progress import ProgressBar
from padbench.contract.api import JobOut, JobStatus, WorkerOut
from padbench.http import ApiError
from padbench.report.terminal import write_table
from padbench.specfile import SpecError, load_spec
from padbench.terminal_text import literal
from padbench.tokens import random_token, token_digest

# The example specs ship inside the package (padbench.examples), so the demo runs from any install.
EXAMPLES_PACKAGE = "padbench.examples"
CPU_EXAMPLE = "cpu-demo.yaml"
# Self-contained (synthetic lengths fitted to WikiText), so the demo needs no data files on a GPU box either.
GPU_EXAMPLE = "gpu-demo.yaml"
SERVER_START_TIMEOUT_S = 60.0
# The worker detects its device in a child process (torch import, CUDA start-up) before it registers.
WORKER_REGISTER_TIMEOUT_S = 180.0
DEMO_WORKER_NAME = "demo"
STOP_TIMEOUT_S = 20.0
LOG_TAIL_LINES = 30


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="start a local server and worker, run an example job, print its results, shut down",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--spec", type=Path, default=None,
                        help=f"job spec to run instead of the example ({CPU_EXAMPLE} / {GPU_EXAMPLE})")
    owned = parser.add_mutually_exclusive_group()
    owned.add_argument("--gpu", default=None, help="GPU index for the worker (default: the first visible)")
    owned.add_argument("--gpus", default=None, metavar="LIST",
                       help="the GPUs the worker owns, as `padbench worker --gpus` takes them (0,1), for a spec "
                            "with `gpus: N`")
    parser.set_defaults(handler=run_demo)


@dataclass(frozen=True)
class Tokens:
    submitter: str
    worker: str
    admin: str
    viewer: str  # read-only: the dashboard's token

    @classmethod
    def generate(cls) -> Tokens:
        return cls(*(random_token() for _ in range(4)))

    def write(self, path: Path) -> None:
        # Digests only: the tokens themselves live in this process and its children's environment.
        lines = [f"submitter:demo:{token_digest(self.submitter)}", f"worker:demo-worker:{token_digest(self.worker)}",
                 f"admin:demo:{token_digest(self.admin)}", f"viewer:dashboard:{token_digest(self.viewer)}"]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        path.chmod(0o600)


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def padbench_command(*args: str) -> list[str]:
    """Run subcommands with this interpreter, so the demo works from a venv without activating it."""
    return [sys.executable, "-m", "padbench.cli", *args]


@contextmanager
def background(command: list[str], log_path: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A subprocess in its own session, logging to a file; SIGTERM (then SIGKILL) when the block exits."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield process
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"  | {line}" for line in lines[-LOG_TAIL_LINES:])


class DemoError(RuntimeError):
    pass


def wait_until_healthy(url: str, server: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise DemoError(f"the server exited with code {server.returncode}:\n{log_tail(log_path)}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == httpx.codes.OK:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise DemoError(f"the server did not answer /healthz within {SERVER_START_TIMEOUT_S:.0f} s:\n{log_tail(log_path)}")


def wait_for_worker(client: PadbenchClient, worker: subprocess.Popen[bytes], log_path: Path) -> WorkerOut:
    """The demo worker as the server knows it, once it has registered with its detected capabilities."""
    deadline = time.monotonic() + WORKER_REGISTER_TIMEOUT_S
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise DemoError(f"the worker exited with code {worker.returncode}:\n{log_tail(log_path)}")
        registered = [known for known in client.workers() if known.name == DEMO_WORKER_NAME]
        if registered:
            return registered[0]
        time.sleep(0.2)
    raise DemoError(f"the worker did not register within {WORKER_REGISTER_TIMEOUT_S:.0f} s:\n{log_tail(log_path)}")


def choose_example(worker: WorkerOut) -> str:
    """The GPU-sized example on a worker that found a GPU, the CPU-sized one otherwise."""
    if worker.capabilities.device == "cuda":
        print(f"GPU found ({literal(str(worker.capabilities.gpu_name))}): running {GPU_EXAMPLE}", file=sys.stderr)
        return GPU_EXAMPLE
    print(f"no GPU visible: running the CPU-sized {CPU_EXAMPLE}", file=sys.stderr)
    return CPU_EXAMPLE


@contextlib.contextmanager
def spec_file(explicit: Path | None, worker: WorkerOut) -> Iterator[Path]:
    if explicit is not None:
        yield explicit
        return
    with as_file(files(EXAMPLES_PACKAGE).joinpath(choose_example(worker))) as path:
        yield path


def run_job(url: str, token: str, spec_path: Path, worker: subprocess.Popen[bytes]) -> int:
    spec = load_spec(spec_path)

    def show(job: JobOut) -> None:
        bar.update(job)
        if worker.poll() is not None and not job.status.is_final:
            raise DemoError(f"the worker exited with code {worker.returncode} before job {job.id} finished")

    with PadbenchClient(url, token) as client:
        created = client.submit(spec.model_dump(mode="json"))
        print(f"submitted job {created.id} ({spec_path.name})", file=sys.stderr)
        bar = ProgressBar()
        try:
            job = client.wait(created.id, on_update=show)
        finally:
            bar.finish()
        if job.status is not JobStatus.succeeded:
            raise DemoError(f"job {job.id} {job.status.value}: {job.error or 'no error recorded'}")
        write_table(client.results(created.id), sys.stdout)
    return 0


def demo_environment(workdir: Path) -> dict[str, str]:
    """The server's and worker's environment: the demo's tokens and database, and, unless set already, this
    directory as the worker's data and model roots, so a spec's file names mean what they mean to `padbench run`
    here. PYTHONSAFEPATH keeps a checkout's own `padbench/` folder from shadowing an installed package."""
    here = os.getcwd()
    return {"PADBENCH_DATA_ROOTS": here, "PADBENCH_MODEL_ROOTS": here} | os.environ | {
        "PADBENCH_TOKENS_FILE": str(workdir / "tokens"),
        "PADBENCH_DATABASE_URL": f"sqlite:///{workdir / 'padbench.db'}",
        "PYTHONSAFEPATH": "1",
    }


def worker_gpu_options(args: argparse.Namespace) -> list[str]:
    """The demo worker's GPU options, passed on as given (the worker checks them)."""
    if args.gpus is not None:
        return ["--gpus", args.gpus]
    return [] if args.gpu is None else ["--gpu", args.gpu]


def run_demo(args: argparse.Namespace) -> int:
    try:
        return _run_demo(args.spec, worker_gpu_options(args))
    except (DemoError, SpecError, ApiError) as error:
        print(f"padbench demo: {error}", file=sys.stderr)
        return 1


def _run_demo(spec: Path | None, gpu_options: list[str]) -> int:
    if spec is not None:
        load_spec(spec)  # a spec that does not validate is refused before anything starts
    with tempfile.TemporaryDirectory(prefix="padbench-demo-") as scratch:
        workdir = Path(scratch)
        tokens = Tokens.generate()
        tokens.write(workdir / "tokens")
        url = f"http://127.0.0.1:{free_loopback_port()}"
        env = demo_environment(workdir)
        port = url.rsplit(":", 1)[1]
        server_log, worker_log = workdir / "server.log", workdir / "worker.log"
        server_command = padbench_command("server", "--host", "127.0.0.1", "--port", port)
        with background(server_command, server_log, env) as server:
            wait_until_healthy(url, server, server_log)
            # The token goes through the environment: not visible in `ps`, and never mistaken for an option.
            worker_command = padbench_command("worker", "--server", url, "--name", DEMO_WORKER_NAME, *gpu_options)
            with background(worker_command, worker_log, env | {"PADBENCH_TOKEN": tokens.worker}) as worker:
                print(f"server {url} and worker pid {worker.pid} started (logs in {workdir})", file=sys.stderr)
                print(f"dashboard {url}/ while the demo runs; its read-only token: {tokens.viewer}", file=sys.stderr)
                try:
                    with PadbenchClient(url, tokens.admin) as admin:
                        registered = wait_for_worker(admin, worker, worker_log)
                    with spec_file(spec, registered) as spec_path:
                        return run_job(url, tokens.submitter, spec_path, worker)
                except DemoError as error:
                    raise DemoError(f"{error}\nworker log:\n{log_tail(worker_log)}") from error
