"""The database's side of `/healthz`: does it answer, does it accept a write, how much room is left, is
the file whole (the last integrity check) and did requests meet failures lately.

The write is one upsert of the single `health_probe` row, timed by the database clock: it takes the same
locks and the same path to disk as a job's write, so a read-only, locked or unwritable database shows here
before a submitter meets it. Room is reported for SQLite only (a file on this host); PostgreSQL's disk is
the database server's to watch, and its filling shows as the failures requests met (a full PostgreSQL can
still rewrite the probe's row in place while it refuses every new job).

The probe runs at most once per `PROBE_INTERVAL_S`: callers within that second share the last report, and
callers arriving while a probe runs share that one, so a storm of health checks costs the database one
small write a second. A caller waits for a running probe only `FRESH_WAIT_S`; past that it gets the last
report while it is younger than `STALE_LIMIT_S`, so a probe queued behind a busy second of writes never holds
a load balancer's check (on 16 cores with 200 clients polling, waiting gave `/healthz` a p99 of 0.3 s). With no
recent report, it waits at most `PROBE_ANSWER_LIMIT_S` and then says the database has not answered. The probe
runs on a thread of its own, never queued behind the requests' threads.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.failures import describe
from padbench.server.db.integrity import IntegrityWatch
from padbench.server.db.models import HealthProbe
from padbench.server.db.recent_failures import FailureSource

OK = "ok"
PROBE_ROW_ID = 1
PROBE_INTERVAL_S = 1.0
FRESH_WAIT_S = 0.05
STALE_LIMIT_S = 5.0
PROBE_ANSWER_LIMIT_S = 2.0


def write_probe(session: Session) -> None:
    """Rewrite the probe row with the database's time (inserting it the first time): one statement."""
    if session.get_bind().dialect.name == "postgresql":
        pg_insert = postgresql.insert(HealthProbe).values(id=PROBE_ROW_ID, written_at=db_now())
        session.execute(pg_insert.on_conflict_do_update(index_elements=[HealthProbe.id],
                                                        set_={"written_at": pg_insert.excluded.written_at}))
        return
    sqlite_insert = sqlite.insert(HealthProbe).values(id=PROBE_ROW_ID, written_at=db_now())
    session.execute(sqlite_insert.on_conflict_do_update(index_elements=[HealthProbe.id],
                                                        set_={"written_at": sqlite_insert.excluded.written_at}))


def sqlite_room_bytes(session: Session, database_file: Path) -> int:
    """How many bytes a SQLite database can still grow by: its filesystem's free space, or less where the
    database's page limit (PRAGMA max_page_count) leaves less."""
    pages, free_pages, page_size, max_pages = session.execute(text(
        "SELECT * FROM pragma_page_count(), pragma_freelist_count(), pragma_page_size(), pragma_max_page_count()"
    )).one()
    below_page_limit = (max_pages - pages + free_pages) * page_size
    return min(shutil.disk_usage(database_file.parent).free, below_page_limit)


@dataclass(frozen=True)
class HealthReport:
    database: str  # "ok", or why it did not answer
    database_write: str  # "ok", or why the probe write failed
    disk_free_bytes: int | None
    problems: list[str] = field(default_factory=list)
    integrity: str | None = None  # the last quick_check's verdict (SQLite); None when there is none
    recent_failures: list[str] = field(default_factory=list)


def check_health(database: Database, min_free_bytes: int) -> HealthReport:
    answers, writes, room = OK, OK, None
    database_file = database.file_guard.path if database.file_guard is not None else None
    try:
        with database.read() as session:
            session.execute(text("SELECT 1"))
            room = sqlite_room_bytes(session, database_file) if database_file is not None else None
    except Exception as error:  # whatever went wrong, the database is not healthy; say why
        answers = describe(error)
    try:
        with database.writing() as session:
            write_probe(session)
    except Exception as error:
        writes = describe(error)
    problems = [f"database: {answers}"] if answers != OK else []
    problems += [f"database write: {writes}"] if writes != OK else []
    if room is not None and room < min_free_bytes:
        problems.append(f"{room} bytes left for the database, below PADBENCH_MIN_FREE_DISK_BYTES={min_free_bytes}")
    return HealthReport(answers, writes, room, problems)


class HealthMonitor:
    """`/healthz`'s report: the database probe (at most one a second, shared), the last integrity verdict and
    the failures requests met lately. Used from the event loop only, so its state needs no lock."""

    def __init__(self, database: Database, min_free_bytes: int, integrity: IntegrityWatch,
                 recent_failures: FailureSource, clock: Callable[[], float] = time.monotonic) -> None:
        self.database = database
        self.min_free_bytes = min_free_bytes
        self.integrity = integrity
        self.recent_failures = recent_failures
        self._clock = clock
        self._last: tuple[float, HealthReport] | None = None
        self._in_flight: asyncio.Future[HealthReport] | None = None
        self._prober = ThreadPoolExecutor(max_workers=1, thread_name_prefix="padbench-health-probe")
        self.probes = 0  # real probes run, for the tests of the rate limit

    async def report(self) -> HealthReport:
        probed = await self._probe_result()
        problems = list(probed.problems)
        verdict = self.integrity.verdict
        if verdict is not None and verdict != OK:
            problems.append(f"database integrity: {verdict}")
        recent = self.recent_failures.recent()
        problems += recent
        return replace(probed, problems=problems, integrity=verdict, recent_failures=recent)

    async def _probe_result(self) -> HealthReport:
        age = self._clock() - self._last[0] if self._last is not None else None
        if self._last is not None and age is not None and age < PROBE_INTERVAL_S:
            return self._last[1]
        if self._in_flight is None:
            self._in_flight = asyncio.ensure_future(self._probe())
        recent = self._last is not None and age is not None and age < STALE_LIMIT_S
        try:
            # shield: a caller that stops waiting (or whose client left) must not cancel the probe others share
            return await asyncio.wait_for(asyncio.shield(self._in_flight),
                                          FRESH_WAIT_S if recent else PROBE_ANSWER_LIMIT_S)
        except TimeoutError:
            if recent and self._last is not None:
                return self._last[1]
            return _unanswered(PROBE_ANSWER_LIMIT_S)

    async def _probe(self) -> HealthReport:
        try:
            self.probes += 1
            loop = asyncio.get_running_loop()
            report = await loop.run_in_executor(self._prober, check_health, self.database, self.min_free_bytes)
            self._last = (self._clock(), report)
            return report
        finally:
            self._in_flight = None

    def close(self) -> None:
        self._prober.shutdown(wait=False, cancel_futures=True)


def _unanswered(seconds: float) -> HealthReport:
    why = f"no answer within {seconds:g} s"
    return HealthReport(why, why, None, [f"database: {why}"])
