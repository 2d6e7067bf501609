"""A time limit that falls after a row's measurement, in a phase timed after it (a training row's step split),
keeps the row's measured figures: `padbench run --timeout` on a real padding job whose only row had finished
both repeats. The limit is never waited out: the parent's clock jumps past it once the child says it blocks in
its step split, so it falls there, after the measurement, however slow the machine."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.cli import run as run_command
from padbench.worker.runtime import isolation
from tests.acceptance.specs import QUICK
from tests.integration.job_targets import BLOCKED_AFTER_MEASURING

# Far more than the tiny job needs to reach its step split on a busy machine: in real time the limit never
# falls before it; the clock's jump makes it fall in the split.
TIME_LIMIT_S = 900
ONE_TRAINING_ROW = QUICK | {
    "mode": "training",
    "strategies": ["packed"],
    "measurement": QUICK["measurement"] | {"repeats": 2},
}


class ClockJumpingOnceBlocked:
    """The parent's clock, jumped by the whole time limit once the child says it blocks in its step split: the
    limit then falls there for certain, as it would after TIME_LIMIT_S of real waiting, without the wait."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset_s

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def jump_when_blocked(clock: ClockJumpingOnceBlocked) -> type[run_command.ProgressPrinter]:
    class Printer(run_command.ProgressPrinter):
        def __call__(self, fraction: float, message: str) -> None:
            super().__call__(fraction, message)
            if message == BLOCKED_AFTER_MEASURING:
                clock.offset_s = TIME_LIMIT_S

    return Printer


@pytest.mark.slow
def test_a_time_limit_in_the_step_split_keeps_the_measured_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    clock = ClockJumpingOnceBlocked()
    monkeypatch.setattr(isolation, "time", clock)
    monkeypatch.setattr(run_command, "ProgressPrinter", jump_when_blocked(clock))
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
