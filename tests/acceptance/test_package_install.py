"""The package as a user installs it: a regular (not editable) `pip install` into a fresh virtual
environment, used from a directory outside the repository.

It must add exactly one top-level import name (`padbench`), carry its migrations and example specs as
package data, apply its migrations and run `padbench run` from there. The dependencies come from the test's
own environment, made visible to the new one through a `.pth` file, so the test checks the package layout
rather than downloading anything. The demo (a server, a worker and a job) runs once, from the README's own
install, in `test_readme_first_run.py`.
"""

from __future__ import annotations

import site
import sqlite3
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_CPU_SPEC = """\
kind: padding
model: tiny
data: {source: synthetic, max_length: 64, num_samples: 32, seed: 0}
strategies: [static, packed]
attention: sdpa
batch_size: 8
dtype: fp32
device: cpu
measurement: {warmup_batches: 1, min_seconds: 0.0, min_batches: 1, repeats: 1, correctness_samples: 2}
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(REPO_ROOT)], check=True, capture_output=True)
    return next(out.glob("padbench-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; returns its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    # This environment's packages (torch, fastapi, …) after the new venv's own; not its editable padbench,
    # whose finder is registered by a .pth file that only a site directory's own listing runs.
    dependencies = [sysconfig.get_path("purelib"), *site.getsitepackages()]
    (purelib / "padbench-test-dependencies.pth").write_text("\n".join(dict.fromkeys(dependencies)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True)
    return venv / "bin"


def run(bin_dir: Path, cwd: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    return subprocess.run(list(args), cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout)


def test_the_wheel_holds_one_top_level_package_with_its_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == {"padbench"}
    assert "padbench/migrations/env.py" in names
    assert any(name.startswith("padbench/migrations/versions/") for name in names)
    assert "padbench/examples/cpu-demo.yaml" in names
    assert "padbench/server/main.py" in names and "padbench/worker/jobs/__init__.py" in names
    # The dashboard and the offline API docs: templates, scripts and the vendored libraries.
    assert {"padbench/server/web/templates/base.html", "padbench/server/web/static/pages.js",
            "padbench/kinds/padding/view.js", "padbench/kinds/attention/view.js", "padbench/kinds/tune/view.js",
            "padbench/server/web/static/vendor/chartjs/chart.umd.min.js",
            "padbench/server/web/static/vendor/swagger-ui/swagger-ui-bundle.js",
            "padbench/server/web/static/vendor/redoc/redoc.standalone.js"} <= set(names)


def test_generic_names_are_not_importable_and_the_package_is_the_installed_one(installed: Path,
                                                                              tmp_path: Path) -> None:
    for name in ("server", "worker", "client"):
        answer = run(installed, tmp_path, "python", "-c", f"import {name}")
        assert answer.returncode != 0 and "ModuleNotFoundError" in answer.stderr
    answer = run(installed, tmp_path, "python", "-c",
                 "import padbench.server.main, padbench.worker.jobs, padbench.client.api; "
                 "print(padbench.server.main.__file__)")
    assert answer.returncode == 0, answer.stderr
    assert str(installed.parent) in answer.stdout and str(REPO_ROOT) not in answer.stdout


def test_version(installed: Path, tmp_path: Path) -> None:
    from padbench import __version__

    answer = run(installed, tmp_path, "padbench", "--version")
    assert answer.returncode == 0 and answer.stdout.strip() == f"padbench {__version__}"


def test_migrations_apply_from_package_data(installed: Path, tmp_path: Path) -> None:
    database = tmp_path / "padbench.sqlite3"
    answer = run(installed, tmp_path, "padbench", "db", "upgrade", PADBENCH_DATABASE_URL=f"sqlite:///{database}")
    assert answer.returncode == 0, answer.stderr
    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"jobs", "workers", "job_results", "alembic_version"} <= tables


def test_run_on_a_cpu_spec(installed: Path, tmp_path: Path) -> None:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(TINY_CPU_SPEC)
    answer = run(installed, tmp_path, "padbench", "run", str(spec))
    assert answer.returncode == 0, answer.stderr
    assert "static" in answer.stdout and "packed" in answer.stdout
