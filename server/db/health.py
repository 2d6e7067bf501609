"""The database's side of `/healthz`: does it answer, does it accept a write, and how much room is left.

The write is one upsert of the single `health_probe` row, timed by the database clock: it takes the same
locks and the same path to disk as a job's write, so a read-only, locked or unwritable database shows here
before a submitter meets it. Room is reported for SQLite only (a file on this host); PostgreSQL's disk is
the database server's to watch.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.failures import describe
from padbench.server.db.models import HealthProbe

OK = "ok"
PROBE_ROW_ID = 1
IN_MEMORY = ("", ":memory:")


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


def sqlite_file(database: Database) -> Path | None:
    """The SQLite database's file; None for PostgreSQL and an in-memory database."""
    url = database.engine.url
    if url.get_backend_name() != "sqlite" or (url.database or "") in IN_MEMORY:
        return None
    return Path(str(url.database))


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


def check_health(database: Database, min_free_bytes: int) -> HealthReport:
    answers, writes, room, database_file = OK, OK, None, sqlite_file(database)
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
