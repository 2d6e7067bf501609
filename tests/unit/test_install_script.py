"""scripts/install.sh: a user's install (what padbench's commands need), `--dev` for the test tools, pip's noise
kept in a log with its tail shown on a failure, a stamp that skips an install that is current, and the next
command at the end.

pip is not run: the script's copy sits in a temporary checkout whose `.venv/bin/python` is a stand-in that
records its arguments, prints the kind of noise a real editable install prints, and fails when asked to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOISE_LINES = 300
STAND_IN_PYTHON = f"""#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../pip-calls"
for i in $(seq {NOISE_LINES}); do echo "SetuptoolsDeprecationWarning: line $i" >&2; done
if [[ "$*" == *FAIL* ]]; then echo "ERROR: No matching distribution found for torch==FAIL"; exit 1; fi
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("sha256sum") is None,
                                reason="the install script needs bash and sha256sum")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO_ROOT / "scripts" / "install.sh", tmp_path / "scripts" / "install.sh")
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    return tmp_path


def install(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PADBENCH_")} | env
    return subprocess.run(["bash", "scripts/install.sh", *args], cwd=checkout, env=environment, capture_output=True,
                          text=True, timeout=60)


def pip_calls(checkout: Path) -> list[str]:
    path = checkout / ".venv" / "pip-calls"
    return path.read_text().splitlines() if path.exists() else []


def test_a_users_install_is_quiet_pins_torch_and_ends_with_the_next_command(checkout: Path) -> None:
    done = install(checkout)
    assert done.returncode == 0, done.stderr
    assert "SetuptoolsDeprecationWarning" not in done.stdout + done.stderr
    assert len(done.stdout.splitlines()) <= 4
    assert done.stdout.splitlines()[-1].startswith("next: bash scripts/demo.sh")
    calls = pip_calls(checkout)
    assert calls[1].endswith("torch==2.13.0")  # before padbench, so its torch range is already met
    assert calls[2].endswith("-e .[server,worker,plot]")
    assert "SetuptoolsDeprecationWarning: line 1" in (checkout / ".venv" / "padbench-install.log").read_text()


def test_a_current_install_is_skipped_and_a_dev_install_serves_a_users(checkout: Path) -> None:
    assert install(checkout).returncode == 0
    again = install(checkout)
    assert again.stdout.startswith("install: up to date") and len(pip_calls(checkout)) == 3
    dev = install(checkout, "--dev")
    assert dev.returncode == 0 and pip_calls(checkout)[-1].endswith("-e .[dev,postgres]")
    assert dev.stdout.splitlines()[-1].startswith("next: bash scripts/test.sh")
    calls = len(pip_calls(checkout))
    for args in ((), ("--dev",)):
        assert install(checkout, *args).stdout.startswith("install: up to date")
    assert len(pip_calls(checkout)) == calls


def test_a_failing_pip_shows_its_error_and_the_log(checkout: Path) -> None:
    done = install(checkout, PADBENCH_TORCH="torch==FAIL")
    assert done.returncode == 1
    assert "ERROR: No matching distribution found for torch==FAIL" in done.stderr
    assert "the full log is .venv/padbench-install.log" in done.stderr
    assert not (checkout / ".venv" / ".padbench-install-stamp").exists()  # the next run installs again


def test_a_script_that_goes_on_by_itself_gets_no_hint_and_a_wrong_option_is_refused(checkout: Path) -> None:
    done = install(checkout, PADBENCH_INSTALL_NO_HINT="1")
    assert done.returncode == 0 and "next:" not in done.stdout
    wrong = install(checkout, "--devel")
    assert wrong.returncode == 2 and wrong.stderr == "usage: bash scripts/install.sh [--dev]\n"
