"""The database failures requests met lately, for `/healthz` to report.

`/healthz`'s own probe rewrites one small row; a database whose disk is full can still take that write
(PostgreSQL updates a row in the page it already holds) while every submit fails with 507. So the server
remembers each failure a request met, and `/healthz` answers 503 naming it until `window_s` seconds pass
without another. A busy database or a dropped connection is a moment's contention, not a failure to report.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from padbench.server.db.failures import DatabaseFailure

MOMENTARY = frozenset({DatabaseFailure.busy, DatabaseFailure.no_connection_free, DatabaseFailure.connection_lost})


class FailureSource(Protocol):
    """What `/healthz` asks for the failures requests met lately: this process's own record, or in the health
    process, those every API process reported (padbench.server.health_beats)."""

    def recent(self) -> list[str]: ...


class RecentFailures:
    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._last_seen: dict[DatabaseFailure, float] = {}
        self._lock = threading.Lock()

    def record(self, failure: DatabaseFailure) -> None:
        if failure in MOMENTARY:
            return
        with self._lock:
            self._last_seen[failure] = self._clock()

    def recent(self) -> list[str]:
        """Each failure seen within the window, with how long ago, e.g. `… disk is full (12 s ago)`."""
        now = self._clock()
        with self._lock:
            seen = [(failure, now - at) for failure, at in self._last_seen.items() if now - at <= self.window_s]
        return [f"a request failed: {failure.value} ({math.floor(age)} s ago)" for failure, age in seen]
