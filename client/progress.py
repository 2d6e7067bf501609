"""A job progress bar on stderr: redrawn in place on a terminal, one line per change otherwise (logs, CI)."""

from __future__ import annotations

import sys
from typing import TextIO

from padbench.contract.api import JobOut

BAR_WIDTH = 30


def describe_progress(job: JobOut) -> str:
    """`[#########.....]  30% running on gpu-box-0: static: batch 12/40` — or the status alone."""
    parts = []
    if job.progress is not None:
        filled = round(job.progress * BAR_WIDTH)
        parts.append(f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {job.progress * 100:3.0f}%")
    parts.append(job.status.value)
    if job.worker and job.status.value == "running":
        parts.append(f"on {job.worker}")
    line = " ".join(parts)
    if job.progress_message and not job.status.is_final:
        line += f": {job.progress_message}"
    return f"job {job.id} {line}"


class ProgressBar:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._interactive = self._stream.isatty()
        self._last = ""
        self._width = 0

    def update(self, job: JobOut) -> None:
        line = describe_progress(job)
        if line == self._last:
            return
        self._last = line
        if self._interactive:
            # Pad with spaces so a shorter line fully covers the previous one.
            self._stream.write("\r" + line.ljust(self._width))
            self._width = max(self._width, len(line))
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def finish(self) -> None:
        if self._interactive and self._last:
            self._stream.write("\n")
            self._stream.flush()
