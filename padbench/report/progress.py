"""A progress bar for a terminal (rich): bar, percentage, elapsed time, ETA and the latest message.

Used by `padbench run` (a job on this machine) and by the client's `wait`/`submit --wait`; each falls back
to one plain line per change when its stream is not a terminal, so logs never fill with redraws.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class TerminalProgress:
    """Started by the first update, stopped by `stop`; the ETA is rich's estimate from the fractions seen."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self._progress = Progress(
            TextColumn(label), BarColumn(), TaskProgressColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"), console=Console(file=stream),
        )
        self._task: TaskID | None = None

    def update(self, fraction: float, description: str) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(description, total=1.0)
        self._progress.update(self._task, completed=min(max(fraction, 0.0), 1.0), description=description)

    def stop(self) -> None:
        if self._task is not None:
            self._progress.stop()
