"""What people see: the progress line, a job's status, the job list and the worker list, with every string
the server sends shown as it was written, never acted on by the terminal."""

from __future__ import annotations

import io
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from rich.console import Console

from padbench.client.display import format_age, format_page, format_status, format_workers, page_table, workers_table
from padbench.client.exits import EXIT_FAILED, reported
from padbench.client.progress import ProgressBar, describe_progress
from padbench.contract.api import JobOut, JobPage, WorkerOut
from padbench.http import ApiError

CREATED = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def job(**fields: Any) -> JobOut:
    base = {"id": 4, "kind": "padding", "status": "running", "attempts": 1, "max_attempts": 3,
            "submitter": "alice", "created_at": CREATED, "spec": {}}
    return JobOut.model_validate(base | fields)


def test_the_progress_line_has_a_bar_the_worker_and_the_message() -> None:
    line = describe_progress(job(progress=0.5, progress_message="packed: batch 3/6", worker="box-gpu0"))
    assert line == f"job 4 [{'#' * 15}{'.' * 15}]  50% running on box-gpu0: packed: batch 3/6"


def test_a_queued_job_without_progress_shows_only_its_status() -> None:
    assert describe_progress(job(status="queued")) == "job 4 queued"


def test_a_non_terminal_stream_gets_one_line_per_change() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    for fraction in (0.1, 0.1, 0.2):
        bar.update(job(progress=fraction))
    bar.finish()
    assert stream.getvalue().count("\n") == 2


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_rich_bar_with_elapsed_time_and_eta() -> None:
    stream = Terminal()
    bar = ProgressBar(stream)
    bar.update(job(progress=0.25, progress_message="static: batch 3/12", worker="box-gpu0"))
    bar.update(job(status="succeeded", progress=1.0))
    bar.finish()
    text = stream.getvalue()
    assert "job 4" in text and "elapsed" in text and "ETA" in text and "100%" in text and "succeeded" in text


def test_status_shows_the_error_and_attempts() -> None:
    text = format_status(job(status="failed", error="oom: CUDA out of memory", attempts=3))
    assert "attempts   3 of 3" in text
    assert "error      oom: CUDA out of memory" in text


def test_the_list_is_aligned_and_says_how_many_there_are() -> None:
    page = JobPage(items=[job(id=12, name="seed"), job(id=3, status="queued")], total=40, limit=2, offset=0)
    lines = format_page(page).splitlines()
    assert lines[0].split() == ["ID", "STATUS", "KIND", "NAME", "PROGRESS", "WORKER", "CREATED"]
    assert lines[1].split()[:4] == ["12", "running", "padding", "seed"]
    assert lines[-1] == "(2 shown, 1-2 of 40)"


def test_on_a_terminal_the_list_is_a_rich_table_coloured_by_status() -> None:
    page = JobPage(items=[job(id=12, name="seed", status="failed"), job(id=3, status="queued")], total=2, limit=2,
                   offset=0)
    table = page_table(page)
    assert [row.style for row in table.rows] == ["red", None]
    console = Console(file=io.StringIO(), width=120)
    console.print(table)
    assert "seed" in console.file.getvalue() and "(2 shown, 1-2 of 2)" in console.file.getvalue()


def worker(name: str, **fields: Any) -> WorkerOut:
    base = {"id": 1, "name": name, "capabilities": {"device": "cpu"}, "registered_at": CREATED}
    return WorkerOut.model_validate(base | fields)


def test_ages_read_in_their_largest_whole_unit() -> None:
    ago = [format_age(CREATED - timedelta(seconds=seconds), CREATED) for seconds in (3, 59, 60, 7199, 7200, 90_000)]
    assert ago == ["3 s ago", "59 s ago", "1 min ago", "1 h ago", "2 h ago", "1 d ago"]
    assert format_age(CREATED + timedelta(seconds=2), CREATED) == "0 s ago"  # a clock slightly ahead
    assert format_age(None, CREATED) == "never"


def test_the_worker_list_shows_device_gpu_labels_last_contact_and_running_job() -> None:
    gpu = {"device": "cuda", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_memory_bytes": 85_045_460_992,
           "labels": ["nvlink", "team-a"]}
    workers = [worker("h100-0", capabilities=gpu, last_contact_at=CREATED - timedelta(seconds=3), running_job_id=12),
               worker("cpu-box")]
    lines = format_workers(workers, CREATED).splitlines()
    assert lines[0].split() == ["NAME", "DEVICE", "GPU", "GPUS", "BUSY", "LABELS", "LAST", "CONTACT", "RUNNING",
                                "JOBS"]
    assert lines[1].split() == ["h100-0", "cuda", "NVIDIA", "H100", "80GB", "HBM3", "(79", "GiB)", "-", "nvlink,",
                                "team-a", "3", "s", "ago", "12"]
    assert lines[2].split() == ["cpu-box", "cpu", "-", "-", "-", "never", "-"]
    assert lines[3] == "(2 registered)"
    drawn = io.StringIO()
    Console(file=drawn, width=120).print(workers_table(workers, CREATED))
    assert "NVIDIA H100 80GB HBM3 (79 GiB)" in drawn.getvalue() and "3 s ago" in drawn.getvalue()


def test_a_worker_with_several_gpus_shows_them_how_many_are_busy_and_each_running_job() -> None:
    h100 = {"name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85_045_460_992}
    alike = {"device": "cuda", "gpus": [h100 | {"index": str(index)} for index in range(4)]}
    a100 = {"index": "1", "name": "NVIDIA A100", "memory_bytes": 0}
    mixed = {"device": "cuda", "gpus": [h100 | {"index": "0"}, a100]}
    workers = [worker("box", capabilities=alike, gpus_busy=3, running_job_ids=[7, 9], running_job_id=9),
               worker("mixed", capabilities=mixed, gpus_busy=0)]
    cells = [re.split(r"\s{2,}", line) for line in format_workers(workers, CREATED).splitlines()]
    assert cells[1] == ["box", "cuda", "4 × NVIDIA H100 80GB HBM3 (79 GiB)", "3 of 4", "-", "never", "7, 9"]
    assert cells[2] == ["mixed", "cuda", "0: NVIDIA H100 80GB HBM3 (79 GiB); 1: NVIDIA A100 (0 GiB)", "0 of 2", "-",
                        "never", "-"]


def test_a_job_no_live_worker_could_take_says_why_it_waits() -> None:
    job = JobOut.model_validate({"id": 3, "kind": "padding", "status": "queued", "attempts": 0, "max_attempts": 3,
                                 "submitter": "alice", "created_at": CREATED, "spec": {"gpus": 4},
                                 "waiting_reason": "needs 4 GPUs; the most any live worker owns is 2"})
    assert "waits      needs 4 GPUs; the most any live worker owns is 2" in format_status(job)


# A name that would retitle the window, clear the screen, and draw a link and bold red text if shown as written.
HOSTILE = "evil\x1b]0;owned\x07\x1b[2J[link=https://evil.example]click[/link] [bold red]x[/]\r"
HOSTILE_SHOWN = "evil\\x1b]0;owned\\x07\\x1b[2J[link=https://evil.example]click[/link] [bold red]x[/]\\r"


def drawn_on_a_terminal(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=400, force_terminal=True, color_system="truecolor")
    console.print(renderable)
    return console.file.getvalue()


def assert_nothing_acts_on_the_terminal(text: str) -> None:
    """Only rich's own colour codes (`ESC[…m`) may remain: no title, no clearing, no link, no carriage return."""
    assert "\x07" not in text and "\r" not in text and "\x1b]" not in text and "\x1b[2J" not in text
    assert re.sub(r"\x1b\[[0-9;]*m", "", text).count("\x1b") == 0


def test_status_shows_every_string_from_the_server_literally() -> None:
    text = format_status(job(name=HOSTILE, submitter=HOSTILE, worker=HOSTILE, error=HOSTILE,
                             progress=0.5, progress_message=HOSTILE, waiting_reason=HOSTILE))
    assert_nothing_acts_on_the_terminal(text)
    for label in ("name", "submitter", "worker", "error", "waits"):
        assert f"{label:<10} {HOSTILE_SHOWN}" in text.splitlines()
    assert f"50%  {HOSTILE_SHOWN}" in text


def test_the_job_list_shows_names_literally_in_plain_text_and_on_a_terminal() -> None:
    page = JobPage(items=[job(id=12, name=HOSTILE, worker="box\x1b[8m")], total=1, limit=1, offset=0)
    plain = format_page(page)
    assert HOSTILE_SHOWN in plain and "box\\x1b[8m" in plain
    assert_nothing_acts_on_the_terminal(plain)
    drawn = drawn_on_a_terminal(page_table(page))
    assert HOSTILE_SHOWN in drawn and "box\\x1b[8m" in drawn  # the markup is text, not a link or a style
    assert_nothing_acts_on_the_terminal(drawn)


def test_the_worker_list_shows_names_and_gpus_literally() -> None:
    capabilities = {"device": "cuda", "gpu_name": "[link=https://evil.example]H100[/link]\x1b[2J"}
    workers = [worker(HOSTILE, capabilities=capabilities)]
    plain = format_workers(workers, CREATED)
    drawn = drawn_on_a_terminal(workers_table(workers, CREATED))
    for text in (plain, drawn):
        assert HOSTILE_SHOWN in text and "[link=https://evil.example]H100[/link]\\x1b[2J" in text
        assert_nothing_acts_on_the_terminal(text)


def test_the_progress_bar_shows_the_worker_and_message_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # wide enough that rich keeps the whole description on the line
    hostile = job(progress=0.5, worker=HOSTILE, progress_message="[link=https://evil.example]x[/link]\x1b]0;t\x07")
    line = describe_progress(hostile)
    assert f"on {HOSTILE_SHOWN}: [link=https://evil.example]x[/link]\\x1b]0;t\\x07" in line
    assert_nothing_acts_on_the_terminal(line)
    stream = Terminal()
    bar = ProgressBar(stream)
    bar.update(hostile)
    bar.finish()
    drawn = stream.getvalue()  # rich's own cursor codes redraw the bar; none of the job's words act
    assert "[link=https://evil.example]x[/link]\\x1b]0;t\\x07" in drawn
    assert "\x07" not in drawn and "\x1b]" not in drawn and "\x1b[2J" not in drawn


def test_a_failure_from_the_server_is_one_literal_line(capsys: pytest.CaptureFixture[str]) -> None:
    def refused() -> int:
        raise ApiError(f"HTTP 422: spec.name: {HOSTILE}\nsecond line")

    assert reported("submit", refused, ()) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == f"padbench submit: HTTP 422: spec.name: {HOSTILE_SHOWN}\\nsecond line\n"
