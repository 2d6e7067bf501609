"""A time limit that falls after a row's measurement, in a phase timed after it (a training row's step split),
keeps the row's measured figures: `padbench run --timeout` on a real padding job whose only row had finished
both repeats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.cli import run as run_command
from tests.acceptance.specs import QUICK

# Far more than the tiny job needs to reach its step split on a busy machine; the split then blocks past it.
TIME_LIMIT_S = 90
ONE_TRAINING_ROW = QUICK | {
    "mode": "training",
    "strategies": ["packed"],
    "measurement": QUICK["measurement"] | {"repeats": 2},
}


@pytest.mark.slow
def test_a_time_limit_in_the_step_split_keeps_the_measured_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(
        run_command, "JOB_ENTRY_POINT", "tests.integration.job_targets:padding_job_blocking_after_its_measurement"
    )
    spec, out = tmp_path / "spec.yaml", tmp_path / "out.json"
    spec.write_text(yaml.safe_dump(ONE_TRAINING_ROW))
    assert main(["run", str(spec), "--timeout", str(TIME_LIMIT_S), "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "blocked in the step split" in captured.err  # it was stopped there, after the measurement
    result = JOB_RESULT_ADAPTER.validate_python(json.loads(out.read_text()))
    assert isinstance(result, PaddingResult) and result.partial is not None
    assert (result.partial.reason, result.partial.rows_finished, result.partial.rows_planned) == ("timed_out", 1, 1)
    assert result.partial.last_row_measured_only
    [row] = result.strategies
    assert row.status == "ok" and row.tokens_per_s is not None and row.tokens_per_s > 0
    assert len(row.repeat_tokens_per_s) == 2 and row.memory is not None
    assert row.step_split is None  # its phase never ended: absent, never guessed
    assert "before its step split and collectives profile" in captured.out
