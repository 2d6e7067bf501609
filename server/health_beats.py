"""How the health process (`padbench server --health-port`) knows what the API's processes know.

Each API process's event loop writes a small file every `BEAT_INTERVAL_S`: when it last ran, and the database
failures its requests met lately (what `/healthz` names; see padbench.server.db.recent_failures). The health
process reads them at each probe. A beat that stops coming means that process's event loop no longer runs (a
deadlock, a stopped process): the health process answers 503 for it, so an orchestrator restarts a server
that hangs, as it would if the API answered `/livez` itself. A file is replaced whole (written beside it,
then renamed), so a reader never sees half of one; a process that ended is left out by its pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from padbench.server.db.recent_failures import FailureSource

BEAT_INTERVAL_S = 0.5
PREFIX = "api-"

@dataclass(frozen=True)
class Beat:
    pid: int
    at: float  # the wall clock's seconds: the processes share no other clock
    failures: list[str]


def beat_file(directory: Path, pid: int) -> Path:
    return directory / f"{PREFIX}{pid}.json"


def write_beat(directory: Path, failures: FailureSource, clock: Callable[[], float] = time.time) -> None:
    pid = os.getpid()
    target = beat_file(directory, pid)
    written = target.with_suffix(".tmp")
    written.write_text(json.dumps({"pid": pid, "at": clock(), "failures": failures.recent()}))
    os.replace(written, target)


async def beat_periodically(directory: Path, failures: FailureSource) -> None:
    """An API process's beats, until its server stops; its file goes with it, so a clean stop is no stall."""
    try:
        while True:
            with contextlib.suppress(OSError):  # a full disk delays a beat; /healthz reports the disk itself
                write_beat(directory, failures)
            await asyncio.sleep(BEAT_INTERVAL_S)
    finally:
        beat_file(directory, os.getpid()).unlink(missing_ok=True)


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user
        return True
    return True


class ApiBeats:
    """The health process's view of the API's processes, read afresh at each probe."""

    def __init__(self, directory: Path, stall_limit_s: float, clock: Callable[[], float] = time.time,
                 exists: Callable[[int], bool] = process_exists) -> None:
        self.directory, self.stall_limit_s = directory, stall_limit_s
        self._clock, self._exists = clock, exists

    def read(self) -> list[Beat]:
        beats = []
        for path in sorted(self.directory.glob(f"{PREFIX}*.json")):
            try:
                document = json.loads(path.read_text())
                beat = Beat(int(document["pid"]), float(document["at"]), [str(item) for item in document["failures"]])
            except (OSError, ValueError, KeyError, TypeError):  # replaced or removed while read: the next probe
                continue
            if self._exists(beat.pid):
                beats.append(beat)
        return beats

    def problems(self) -> list[str]:
        """Why the API cannot answer: no process of it has started yet, or one's event loop stopped running."""
        beats = self.read()
        if not beats:
            return ["no API process is running yet"]
        now = self._clock()
        return [f"API process {beat.pid}: its event loop has not run for {math.floor(now - beat.at)} s"
                for beat in beats if now - beat.at > self.stall_limit_s]

    def recent(self) -> list[str]:
        """The failures any API process's requests met lately, each named once."""
        return list(dict.fromkeys(failure for beat in self.read() for failure in beat.failures))
