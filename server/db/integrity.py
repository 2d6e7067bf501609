"""SQLite's own integrity check, run in the background every few minutes rather than on each `/healthz`.

`PRAGMA quick_check` reads every page of the database (it skips only the index-content cross-checks of
the full `integrity_check`), so it costs time in proportion to the file: far too much for a probe a load
balancer sends every second, cheap enough every `interval_s`. Its last verdict is what `/healthz` reports.
A file corrupted between two checks still shows at once on whichever request reads the damaged page (503
naming the corruption; see padbench.server.db.failures), and in `/healthz`'s recent failures.
PostgreSQL checksums and repairs its own pages, and has no equivalent: its verdict is None.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from padbench.server.db.engine import Database
from padbench.server.db.failures import DAMAGED_FILE, classify, describe
from padbench.server.db.migrate import upgrade_to_head

OK = "ok"
DAMAGED_PREFIX = "the database file fails PRAGMA quick_check"
log = logging.getLogger("padbench.server")


def quick_check(database: Database) -> str:
    """"ok", or the first problem SQLite's quick_check finds, or the failure that kept it from finishing."""
    try:
        with database.read() as session:
            rows = [str(row) for row in session.execute(text("PRAGMA quick_check(1)")).scalars()]
    except Exception as error:  # a header too damaged to open is a verdict too
        return describe(error)
    if rows == [OK]:
        return OK
    return f"{DAMAGED_PREFIX} ({' '.join(' '.join(rows).split())}); restore it from a backup (padbench db restore)"


def problem_at_start(database: Database) -> str | None:
    """Why the server must not start on this database (one line: what is wrong, what to do), else None; the
    pending migrations are applied on the way. A SQLite file is read through first: a server started on a
    damaged file would fail request after request, or worse, write beside the damage."""
    where = database.engine.url.render_as_string(hide_password=True)
    guard = database.file_guard
    try:
        verdict = quick_check(database) if guard is not None and guard.path.exists() else OK
        damaged = verdict.startswith(DAMAGED_PREFIX) or verdict in {failure.value for failure in DAMAGED_FILE}
        if verdict == OK:
            upgrade_to_head(database.engine)
    except Exception as error:
        failure = classify(error)
        if failure is None:
            raise  # not a condition of the database: a bug, with its traceback
        verdict, damaged = failure.value, failure in DAMAGED_FILE
    if verdict == OK:
        return None
    if guard is None:
        return f"{where}: {verdict}"
    return f"{guard.path}: {verdict}" + (", or move the file aside to start with an empty one" if damaged else "")


class IntegrityWatch:
    """The last quick_check verdict on a SQLite database (None for PostgreSQL), refreshed every `interval_s`."""

    def __init__(self, database: Database, interval_s: float) -> None:
        self.database = database
        self.interval_s = interval_s
        self.applies = database.engine.dialect.name == "sqlite" and database.file_guard is not None
        self.verdict: str | None = None

    def check_now(self) -> str | None:
        if self.applies:
            self.verdict = quick_check(self.database)
            if self.verdict != OK:
                log.error("database integrity: %s", self.verdict)
        return self.verdict

    async def run_periodically(self) -> None:
        while self.applies:
            await run_in_threadpool(self.check_now)
            await asyncio.sleep(self.interval_s)
