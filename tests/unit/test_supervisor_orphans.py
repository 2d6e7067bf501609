"""A worker killed with SIGKILL takes its job child with it: no orphan keeps computing on the device."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.test_supervisor_loop import process_alive, wait_for

PARENT = """
import json
from padbench.worker.runtime.isolation import run_in_child
run_in_child("tests.unit.supervisor_targets:run_until_killed", json.dumps({{"pid_file": {pid_file!r}}}))
"""


def test_a_sigkilled_parent_takes_its_child_along(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(pid_file=str(pid_file))],
                              cwd=Path(__file__).resolve().parents[2])
    try:
        wait_for(pid_file.exists)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while process_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(child)
    finally:
        parent.kill()
