"""The time left on progress lines: estimated from the pace seen so far, written as a person reads it."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest

from padbench.client.progress import ProgressBar, describe_progress
from padbench.contract.api import JobOut
from padbench.report.progress import RemainingTime, eta_text, format_duration
from padbench.worker.cli.run import ProgressPrinter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("seconds", "text"), [
    (0.4, "0 s"), (45, "45 s"), (59.6, "1 min 00 s"), (185, "3 min 05 s"), (3599, "59 min 59 s"),
    (3600, "1 h 00 min"), (7805, "2 h 10 min"), (90 * 3600, "90 h 00 min"),
])
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_the_time_left_follows_the_pace_since_the_first_update() -> None:
    clock = FakeClock()
    remaining = RemainingTime(clock)
    assert remaining.update(0.20) is None  # joined a job a fifth done: no pace yet
    clock.now += 0.5
    assert remaining.update(0.30) is None  # under a second: too early to tell
    clock.now += 9.5
    assert remaining.update(0.40) == pytest.approx(30.0)  # 20% in 10 s, 60% to go
    clock.now += 10
    assert remaining.update(0.95) == pytest.approx(20 * 0.05 / 0.75)
    assert remaining.update(1.0) is None  # done: nothing to wait for


def test_no_estimate_without_progress() -> None:
    clock = FakeClock()
    remaining = RemainingTime(clock)
    remaining.update(0.5)
    clock.now += 60
    assert remaining.update(0.5) is None and eta_text(None) == ""


def test_run_lines_carry_the_eta_once_the_pace_is_known() -> None:
    clock, stream = FakeClock(), io.StringIO()
    printer = ProgressPrinter(stream, RemainingTime(clock))
    printer(0.0, "building the model on cpu")
    clock.now += 20
    printer(0.21, "static / torch-flash: measuring")
    clock.now += 5
    printer(0.22, "static / torch-flash: measuring")  # the same message: no new line
    assert stream.getvalue().splitlines() == ["[  0%] building the model on cpu",
                                              "[ 21% ETA 1 min 15 s] static / torch-flash: measuring"]


def job(**fields: object) -> JobOut:
    base = {"id": 4, "kind": "padding", "status": "running", "attempts": 1, "max_attempts": 3,
            "submitter": "alice", "created_at": datetime(2026, 11, 21, tzinfo=timezone.utc), "spec": {},
            "worker": "box-gpu0"}
    return JobOut.model_validate(base | fields)


def test_a_waiting_jobs_lines_carry_the_eta_but_a_new_eta_alone_is_no_new_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert describe_progress(job(progress=0.5), seconds_left=125).startswith(f"job 4 [{'#' * 15}{'.' * 15}]  50% "
                                                                             "ETA 2 min 05 s running on box-gpu0")
    assert "ETA" not in describe_progress(job(status="succeeded", progress=1.0), seconds_left=0)
    clock, stream = FakeClock(), io.StringIO()
    monkeypatch.setattr("padbench.client.progress.RemainingTime", lambda: RemainingTime(clock))
    bar = ProgressBar(stream)
    for fraction in (0.1, 0.1, 0.3, 0.3):
        clock.now += 10
        bar.update(job(progress=fraction))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "ETA" not in lines[0] and lines[1].endswith(" 30% ETA 1 min 10 s running on box-gpu0")
