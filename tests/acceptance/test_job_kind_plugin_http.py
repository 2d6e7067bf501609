"""A job kind added as one folder plus one line, end to end with real processes: `padbench server` and the
commands started with `PADBENCH_KIND_PACKAGES=tests.echo_kind` (the one line, for a kind kept outside padbench)
know the `echo` kind (tests/echo_kind/) with nothing else edited. It shows in the server's schema, the worker's
capabilities, `padbench check` and `plan`, the queue (submitted, claimed, completed, read back), the CLI table,
`/metrics` and the dashboard.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from padbench.client.api import PadbenchClient
from padbench.client.demo import Tokens, background, free_loopback_port, wait_until_healthy
from padbench.contract.kinds import PLUGIN_KINDS_VARIABLE
from padbench.report import render
from padbench.worker.jobs import run_job
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.supervisor.capabilities import detect_capabilities
from tests.echo_kind import PACKAGE, registered
from tests.echo_kind.contract import EchoResult

REPO_ROOT = Path(__file__).resolve().parents[2]
SPEC = {"kind": "echo", "word": "over http", "times": 2}


def with_echo(env: dict[str, str]) -> dict[str, str]:
    return env | {PLUGIN_KINDS_VARIABLE: PACKAGE, "PYTHONPATH": str(REPO_ROOT)}


def padbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "padbench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


@pytest.fixture
def echo_server(tmp_path: Path) -> Iterator[tuple[str, Tokens]]:
    tokens = Tokens.generate()
    tokens.write(tmp_path / "tokens")
    url = f"http://127.0.0.1:{free_loopback_port()}"
    env = with_echo(os.environ | {"PADBENCH_TOKENS_FILE": str(tmp_path / "tokens"),
                                  "PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'padbench.db'}"})
    command = [sys.executable, "-m", "padbench.cli", "server", "--host", "127.0.0.1", "--port", url.rsplit(":")[-1]]
    log = tmp_path / "server.log"
    with registered(), background(command, log, env) as process:  # this process reads echo results too
        wait_until_healthy(url, process, log)
        yield url, tokens


def test_the_schema_check_and_plan_know_the_kind(echo_server: tuple[str, Tokens], tmp_path: Path) -> None:
    url, _ = echo_server
    schema = httpx.get(f"{url}/openapi.json", timeout=30).json()
    assert "EchoJobSpec" in schema["components"]["schemas"]
    spec_file = tmp_path / "echo.json"
    spec_file.write_text(json.dumps(SPEC))
    env = with_echo(dict(os.environ))
    checked = padbench("check", str(spec_file), env=env)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines() == ["spec: valid echo job", "  word: 'over http', said 2 times"]
    planned = padbench("plan", str(spec_file), env=env)
    assert planned.returncode == 2 and "an echo job runs no model whose memory spreads over GPUs" in planned.stderr


def test_the_worker_advertises_the_kind_and_its_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PLUGIN_KINDS_VARIABLE, PACKAGE)  # the capabilities are read in a child process
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    capabilities = detect_capabilities(())
    assert "echo" in capabilities.job_kinds and "echo-voice" in capabilities.kernels


def test_an_echo_job_is_queued_claimed_completed_read_back_exported_and_shown(
        echo_server: tuple[str, Tokens]) -> None:
    url, tokens = echo_server
    with PadbenchClient(url, tokens.submitter) as submitter:
        job_id = submitter.submit(SPEC).id
        assert submitter.job(job_id).kind == "echo"

    worker = httpx.Client(base_url=url + "/v1", headers={"Authorization": f"Bearer {tokens.worker}"}, timeout=30)
    with worker:
        capabilities = {"device": "cpu", "kernels": [], "job_kinds": ["echo"]}
        worker_id = worker.post("/workers", json={"name": "echo-worker", "capabilities": capabilities}).json()["id"]
        lease = worker.post("/leases", json={"worker_id": worker_id}).json()
        assert lease["job"]["id"] == job_id
        _, sender = multiprocessing.Pipe(duplex=False)
        result = run_job(ChildContext(sender), json.dumps(lease["job"]["spec"]))
        done = worker.post(f"/leases/{job_id}/complete", json={"lease_token": lease["lease_token"], "result": result})
        assert done.status_code == 204, done.text

    with PadbenchClient(url, tokens.submitter) as submitter:
        assert submitter.job(job_id).status.value == "succeeded"
        stored = submitter.results(job_id)
    assert isinstance(stored, EchoResult) and stored.lines == ["1: over http", "2: over http"]
    assert render(stored, "table") == "echo of 'over http'\n1: over http\n2: over http\n"

    cli_env = with_echo(dict(os.environ)) | {"PADBENCH_SERVER": url, "PADBENCH_TOKEN": tokens.submitter}
    table = padbench("results", str(job_id), env=cli_env)
    assert table.returncode == 0, table.stderr
    assert table.stdout == "echo of 'over http'\n1: over http\n2: over http\n"

    viewer = {"Authorization": f"Bearer {tokens.viewer}"}
    metrics = httpx.get(f"{url}/metrics", headers=viewer, timeout=30).text
    assert 'padbench_echo_lines{word="over http"} 2.0' in metrics

    page = httpx.get(f"{url}/jobs/{job_id}", timeout=30).text
    assert '<script src="/kinds/echo.js"></script>' in page
    view = httpx.get(f"{url}/kinds/echo.js", timeout=30)
    assert view.status_code == 200 and 'registerKind("echo"' in view.text
    assert httpx.get(f"{url}/kinds/nothing.js", timeout=30).status_code == 404
