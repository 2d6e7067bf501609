"""A job progress bar on stderr: a rich bar with elapsed time and ETA on a terminal, one plain line per
change otherwise (logs, CI), with the ETA when it is known, so a log file never fills with redraw characters.

The worker's name and its progress message are shown through `literal` (a control character in them is an
escape, not an instruction to the terminal); the rich bar parses its description as markup, so there they are
also markup-escaped."""

from __future__ import annotations

import sys
from typing import TextIO

from rich.markup import escape

from padbench.contract.api import JobOut
from padbench.report.progress import RemainingTime, TerminalProgress, eta_text
from padbench.terminal_text import literal

BAR_WIDTH = 30


def describe_progress(job: JobOut, seconds_left: float | None = None) -> str:
    """`[#########.....]  30% ETA 2 min 05 s running on gpu-box-0: static: batch 12/40` — or the status alone."""
    parts = []
    if job.progress is not None:
        filled = round(job.progress * BAR_WIDTH)
        eta = eta_text(seconds_left) if job.status.value == "running" else ""
        parts.append(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {job.progress * 100:3.0f}%{eta}")
    parts.append(job.status.value)
    if job.worker and job.status.value == "running":
        parts.append(f"on {literal(job.worker)}")
    line = " ".join(parts)
    if job.progress_message and not job.status.is_final:
        line += f": {literal(job.progress_message)}"
    return f"job {job.id} {line}"


def _status_text(job: JobOut) -> str:
    """The rich bar's description, which rich reads as markup: the job's own words are escaped for it."""
    text = job.status.value + (f" on {job.worker}" if job.worker and job.status.value == "running" else "")
    if job.progress_message and not job.status.is_final:
        text += f": {job.progress_message}"
    return escape(literal(text))


class ProgressBar:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._last = ""
        self._terminal: TerminalProgress | None = None
        self._remaining = RemainingTime()

    def update(self, job: JobOut) -> None:
        if self._stream.isatty():
            self._terminal = self._terminal or TerminalProgress(self._stream, f"job {job.id}")
            self._terminal.update(1.0 if job.status.value == "succeeded" else job.progress or 0.0, _status_text(job))
            return
        seconds_left = self._remaining.update(job.progress or 0.0) if job.status.value == "running" else None
        line = describe_progress(job)  # a new line when this changes, not each time the ETA does
        if line != self._last:
            self._last = line
            self._stream.write(describe_progress(job, seconds_left) + "\n")
            self._stream.flush()

    def finish(self) -> None:
        if self._terminal is not None:
            self._terminal.stop()
