"""Retention: the server itself removes jobs that finished more than PADBENCH_RETENTION_DAYS ago.

The reaper task offers every tick to `Retention.prune_if_due`, which deletes at most once a minute: ages
are counted in days, so pruning more often would only repeat a scan that finds nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from padbench.server import queue
from padbench.server.db.engine import Database

log = logging.getLogger("padbench.server.retention")
PRUNE_INTERVAL_SECONDS = 60.0


class Retention:
    """Prunes finished jobs older than `days` (None: keeps them forever) when a minute has passed since last time."""

    def __init__(self, days: int | None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.days = days
        self._clock = clock
        self._next_prune_at: float | None = None  # the first tick prunes

    def prune_if_due(self, database: Database) -> int:
        """How many jobs were removed (0 when retention is off or it is not time yet)."""
        now = self._clock()
        if self.days is None or (self._next_prune_at is not None and now < self._next_prune_at):
            return 0
        self._next_prune_at = now + PRUNE_INTERVAL_SECONDS
        try:
            with database.writing() as session:
                removed = queue.delete_finished_jobs(session, older_than_days=self.days)
        except Exception:  # a locked or briefly unreachable database must not stop the reaper it rides on
            log.exception("retention: could not remove jobs finished more than %d days ago", self.days)
            return 0
        if removed:
            log.info("retention: removed %d job(s) finished more than %d days ago", removed, self.days)
        return removed
