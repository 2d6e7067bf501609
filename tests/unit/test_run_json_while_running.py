"""`padbench run --json PATH` keeps PATH current while the job runs: each row (each tune trial) the job finishes
is written there at once, marked partial and still running, so a run stopped outright (a lost machine, SIGKILL)
leaves what it measured; the end replaces the file with the whole result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from padbench.cli import main
from padbench.contract.results import PartialResult
from padbench.report.partial import partial_lines
from padbench.worker.cli import run as run_command
from padbench.worker.runtime.isolation import ChildReport
from tests.unit.supervisor_targets import FINISHED_ROW, padding_result


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("model: tiny\ndevice: cpu\ndata: {num_samples: 8, max_length: 32}\n", encoding="utf-8")
    return path


def test_a_finished_row_is_in_the_file_while_the_job_runs(spec: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "result.json"
    seen: list[dict[str, Any]] = []

    def launch_job(*args: object, on_finished: Any, **kwargs: object) -> ChildReport:
        on_finished(padding_result([FINISHED_ROW], PartialResult(rows_finished=1, rows_planned=2)))
        seen.append(json.loads(out.read_text()))  # what a run killed here would leave
        return ChildReport(outcome="ok", value=padding_result([FINISHED_ROW, FINISHED_ROW]))

    monkeypatch.setattr(run_command, "launch_job", launch_job)
    assert main(["run", str(spec), "--json", str(out)]) == 0
    assert seen[0]["partial"]["reason"] == "running" and len(seen[0]["strategies"]) == 1
    assert json.loads(out.read_text())["partial"] is None  # the whole result replaced it
    assert not list(tmp_path.glob(".*.part"))


def test_a_job_that_fails_after_a_row_leaves_it_marked_failed(spec: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "result.json"

    def launch_job(*args: object, on_finished: Any, **kwargs: object) -> ChildReport:
        on_finished(padding_result([FINISHED_ROW], PartialResult(rows_finished=1, rows_planned=2)))
        return ChildReport(outcome="error", error="a kernel broke")

    monkeypatch.setattr(run_command, "launch_job", launch_job)
    assert main(["run", str(spec), "--json", str(out)]) == 1
    assert json.loads(out.read_text())["partial"]["reason"] == "failed"


def test_a_file_left_running_says_so() -> None:
    line = partial_lines(PartialResult(reason="running", rows_finished=3, rows_planned=10), "trials")[0]
    assert "had not finished when this was written" in line and "3 of 10 trials" in line
