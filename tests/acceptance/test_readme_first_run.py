"""A newcomer's first run, as the README writes it: clone the repository (its committed HEAD, as a newcomer
gets it: uncommitted edits are not in it) into an empty directory and run, there, the first of the README's "Two
commands" (`bash scripts/demo.sh`: the install, then a server, a worker and a demo job), timed, and then the
commands of its "Your own model" section (install, init, check, plan and run a spec sized for this machine), and
get a verdict and a result table from each. The second of the two commands (`bash scripts/test.sh`) is the test
suite that runs this test.

The commands are read out of README.md, so the test breaks when the README drifts from what it checks. The
install is the README's own (`bash scripts/install.sh`: a fresh `.venv` with torch and padbench); pip's
cache is kept, so it downloads nothing it already has. `padbench submit … --wait` needs a shared service:
the demo is the same submit against a server and worker it starts itself. This is the one test that installs
everything into a fresh venv; `test_package_install.py` checks the wheel's layout without installing
dependencies.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TWO_COMMANDS = "## Two commands"
OWN_MODEL = "## Your own model"
SPEC = "my-model.yaml"
DEMO = "bash scripts/demo.sh"
TESTS = "bash scripts/test.sh"
# The "Your own model" commands, in order; the first two are the install, the last needs a shared service.
FIRST_RUN = ["bash scripts/install.sh", "source .venv/bin/activate", f"padbench init {SPEC}", f"padbench check {SPEC}",
             f"padbench plan {SPEC}", f"padbench run {SPEC}"]
SUBMIT = f"padbench submit {SPEC} --wait"
# Each step's ceiling on 2 busy cores: the install (torch and the user's extras) with the CPU demo job, then four
# commands. The install and demo take about 3 minutes from a warm pip cache; the test prints what they took.
TIMEOUT_S = 1800

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * TIMEOUT_S + 60)]


def section(readme: str, heading: str) -> str:
    start = readme.index(heading + "\n")
    following = readme.find("\n## ", start + len(heading))
    return readme[start:following if following != -1 else None]


def first_bash_block(text: str) -> list[str]:
    """The commands of the first ```bash block, without comments or blank lines."""
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None, "the section has no ```bash block"
    commands = (line.split("  #")[0].strip() for line in block.group(1).splitlines())
    return [command for command in commands if command and not command.startswith("#")]


def newcomer_environment(home: Path) -> dict[str, str]:
    """This test's environment without its own venv or padbench settings: only what a fresh shell has, the
    pip cache (in the real home) and the tests' hub-offline switches."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PADBENCH_", "VIRTUAL_ENV", "PYTHON"))}
    own_bin = str(Path(os.environ.get("VIRTUAL_ENV", REPO_ROOT / ".venv")) / "bin")
    environment["PATH"] = os.pathsep.join(part for part in environment.get("PATH", "").split(os.pathsep)
                                          if part != own_bin)
    environment.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    environment |= {"HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return environment


def test_the_readme_commands_are_the_ones_this_test_runs() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.index(TWO_COMMANDS) < readme.index(OWN_MODEL)
    assert first_bash_block(section(readme, TWO_COMMANDS)) == [DEMO, TESTS]
    assert first_bash_block(section(readme, OWN_MODEL)) == [*FIRST_RUN, SUBMIT]


def test_a_fresh_clone_installs_and_runs_the_readme_commands(tmp_path: Path, record_property: Callable[..., None],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: the test clones the repository")
    clone, home = tmp_path / "padbench", tmp_path / "home"
    home.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True, capture_output=True)

    def bash(commands: list[str]) -> subprocess.CompletedProcess[str]:
        script = "set -euo pipefail\n" + "\n".join(commands) + "\n"
        done = subprocess.run(["bash", "-c", script], cwd=clone, env=newcomer_environment(home), capture_output=True,
                              text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
        return done

    started = time.monotonic()
    demo = bash([DEMO])
    demo_seconds = time.monotonic() - started
    record_property("install_and_demo_seconds", round(demo_seconds))
    with capsys.disabled():
        print(f"\nthe README's first command (install and the demo job) took {demo_seconds:.0f} s")
    assert "next:" not in demo.stdout  # the demo goes on by itself: no hint to run it
    own_model = bash(FIRST_RUN)
    assert (clone / SPEC).is_file()
    # The demo and `padbench run` each print a results table ending in its verdict.
    for done in (demo, own_model):
        verdicts = re.findall(r"^verdict: .+$", done.stdout, re.MULTILINE)
        assert len(verdicts) == 1, done.stdout[-3000:]
        assert re.search(r"^★? ?packed ", done.stdout.split("verdict: ")[0], re.MULTILINE), done.stdout[-3000:]
