"""A progress bar for a terminal (rich): bar, percentage, elapsed time, ETA and the latest message.

Used by `padbench run` (a job on this machine) and by the client's `wait`/`submit --wait`; each falls back
to one plain line per change when its stream is not a terminal, so logs never fill with redraws, and
those lines carry their own ETA (`RemainingTime`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


# An estimate from less progress, or less time, than this swings too widely to be worth printing.
MIN_PROGRESS_FOR_ETA = 0.01
MIN_SECONDS_FOR_ETA = 1.0


class RemainingTime:
    """Seconds left, from the pace of the progress seen since the first update (which may join a job that
    is already part done); None until there is enough progress to tell."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start: tuple[float, float] | None = None  # (time, fraction) of the first update

    def update(self, fraction: float) -> float | None:
        now = self._clock()
        if self._start is None:
            self._start = (now, fraction)
            return None
        start_time, start_fraction = self._start
        done, seconds = fraction - start_fraction, now - start_time
        if done < MIN_PROGRESS_FOR_ETA or seconds < MIN_SECONDS_FOR_ETA or fraction >= 1.0:
            return None  # too early to tell, or nothing left to wait for
        return (1.0 - fraction) * seconds / done


def format_duration(seconds: float) -> str:
    """`45 s`, `3 min 05 s`, `2 h 10 min`: as precise as a person waiting needs."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def eta_text(seconds_left: float | None) -> str:
    """` ETA 3 min 05 s`, or nothing while the time left is not known yet."""
    return "" if seconds_left is None else f" ETA {format_duration(seconds_left)}"
