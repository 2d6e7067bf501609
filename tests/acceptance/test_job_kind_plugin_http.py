"""A job kind registered only in the tests, over HTTP: a `padbench server` process started with the `echo` kind
registered (tests/echo_kind.py) queues an echo job, a worker claims it and completes it with what the
kind's runner produced, and the stored result reads back through the client and renders. The API bodies'
spec and result unions are built from the registered kinds, so the server needed no edit to accept it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from padbench.client.api import PadbenchClient
from padbench.client.demo import Tokens, background, free_loopback_port, wait_until_healthy
from padbench.report import render
from padbench.worker.jobs import run_job
from padbench.worker.runtime.isolation import ChildContext
from tests.echo_kind import EchoResult, registered

REPO_ROOT = Path(__file__).resolve().parents[2]
# `padbench server`, with the echo kind registered before the API's bodies are defined (padbench.cli
# imports them).
SERVER_WITH_ECHO = ("import sys\nfrom tests.echo_kind import registered\nwith registered():\n"
                    "    from padbench.cli import main\n    sys.exit(main(sys.argv[1:]))")
SPEC = {"kind": "echo", "word": "over http", "times": 2}


@pytest.fixture
def echo_server(tmp_path: Path) -> Iterator[tuple[str, Tokens]]:
    tokens = Tokens.generate()
    tokens.write(tmp_path / "tokens")
    url = f"http://127.0.0.1:{free_loopback_port()}"
    env = os.environ | {"PADBENCH_TOKENS_FILE": str(tmp_path / "tokens"), "PYTHONPATH": str(REPO_ROOT),
                        "PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'padbench.db'}"}
    command = [sys.executable, "-c", SERVER_WITH_ECHO, "server", "--host", "127.0.0.1", "--port", url.rsplit(":")[-1]]
    log = tmp_path / "server.log"
    with registered(), background(command, log, env) as process:  # this process reads echo results too
        wait_until_healthy(url, process, log)
        yield url, tokens


def test_an_echo_job_is_queued_claimed_completed_and_read_back(echo_server: tuple[str, Tokens]) -> None:
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
        result = run_job(ChildContext(sender), lease["job"]["spec"])
        done = worker.post(f"/leases/{job_id}/complete", json={"lease_token": lease["lease_token"], "result": result})
        assert done.status_code == 204, done.text

    with PadbenchClient(url, tokens.submitter) as submitter:
        assert submitter.job(job_id).status.value == "succeeded"
        stored = submitter.results(job_id)
    assert isinstance(stored, EchoResult) and stored.lines == ["1: over http", "2: over http"]
    assert render(stored, "table") == "echo of 'over http'\n1: over http\n2: over http\n"
