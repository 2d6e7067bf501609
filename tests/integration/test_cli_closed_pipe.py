"""`padbench … | head`: the real command, its stdout a pipe whose reader has gone, ends quietly.

Whether a write meets a closed pipe depends on when the reader leaves; to make it certain rather than a race,
the reader here closes its end before the command has written anything (as `head -2` has, by the time a
longer output's next write comes).
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from padbench.cli import CLOSED_PIPE_EXIT
from tests.integration.conftest import LiveServer

PADBENCH = [sys.executable, "-m", "padbench.cli"]


def run_into_closed_pipe(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The command's exit status and stderr, its stdout a pipe whose reader closed before it started."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*PADBENCH, *args], stdout=write_end, stderr=subprocess.PIPE, env=env, timeout=300)
    finally:
        os.close(write_end)
    return done.returncode, done.stderr.decode()


def test_a_command_without_a_server_into_a_closed_pipe() -> None:
    code, stderr = run_into_closed_pipe(["schema"], os.environ | {"HF_HUB_OFFLINE": "1"})
    assert stderr == ""  # no traceback, no "Exception ignored" from the interpreter's last flush
    assert code == CLOSED_PIPE_EXIT


def test_list_into_a_closed_pipe(live_server: LiveServer) -> None:
    for _ in range(3):
        httpx.post(
            f"{live_server.base_url}/v1/jobs",
            headers=live_server.headers("submitter"),
            json={"spec": {"kind": "padding", "name": "piped", "device": "cpu"}},
        ).raise_for_status()
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "PADBENCH_SERVER": live_server.base_url,
        "PADBENCH_TOKEN": live_server.tokens["submitter"],
    }
    code, stderr = run_into_closed_pipe(["list"], env)
    assert stderr == ""
    assert code == CLOSED_PIPE_EXIT
