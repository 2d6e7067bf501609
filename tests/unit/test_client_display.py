"""What people see: the progress line, a job's status, and the job list."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from padbench.client.display import format_page, format_status, page_table
from padbench.client.progress import ProgressBar, describe_progress
from padbench.contract.api import JobOut, JobPage

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
