"""The engine and session factories, built when the app starts (never at import).

SQLite is configured the way a queue needs it: WAL (readers never block the writer), a busy timeout,
foreign keys on, and write transactions begun with `BEGIN IMMEDIATE`. A deferred transaction that
later upgrades to a write fails at once with "database is locked", ignoring the busy timeout; taking
the write lock at BEGIN makes concurrent writers queue politely instead. Read-only sessions begin
DEFERRED so pollers never take the write lock.

A server process also serializes its own SQLite writers on `WriterLock` before they begin: SQLite's busy
handler polls with growing sleeps (up to 100 ms), so writers queued inside SQLite wait far longer than the
few milliseconds each holds the lock, while a lock in the process wakes the next one at once. Other
processes (a second server, `padbench db`) still meet the busy timeout.

The pool has a connection for every thread that may run database work at once (`threads`), so no thread
ever waits for a connection.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from padbench.server.core.config import Settings
from padbench.server.db.failures import DatabaseCondition, DatabaseFailure
from padbench.server.db.file_guard import SqliteFileGuard

BEGIN_MODE_OPTION = "padbench_sqlite_begin"
# Where a write session carries the lock its unit of work must hold (see padbench.server.api.transactions).
WRITE_LOCK_INFO_KEY = "padbench_write_lock"
# Connections kept beyond the worker threads: start-up, the CLI's own commands, a request racing shutdown.
SPARE_CONNECTIONS = 4
IN_MEMORY = ("", ":memory:")


class DatabaseBusy(DatabaseCondition):
    """This process's SQLite writers did not get the write lock within the busy timeout."""

    def __init__(self) -> None:
        super().__init__(DatabaseFailure.busy)


class WriterLock:
    """One SQLite writer at a time in this process; waiting longer than the busy timeout raises DatabaseBusy."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def __enter__(self) -> WriterLock:
        if not self._lock.acquire(timeout=self.timeout_s):
            raise DatabaseBusy
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()


def normalize_database_url(url: str) -> str:
    """`postgresql://` means psycopg 3 here (the only PostgreSQL driver we depend on)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _prepare_sqlite_connection(dbapi_connection: Any, busy_timeout_ms: int) -> None:
    # Hand transaction control to SQLAlchemy's begin event (pysqlite would otherwise emit its own BEGIN).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")  # durable enough with WAL, and much faster
    cursor.close()


def _begin_sqlite_transaction(connection: Connection, guard: SqliteFileGuard | None) -> None:
    if guard is not None:
        guard.check()  # a transaction on a deleted file would be acknowledged and then lost
    mode = connection.get_execution_options().get(BEGIN_MODE_OPTION, "IMMEDIATE")
    connection.exec_driver_sql(f"BEGIN {mode}")


def _guard_file(engine: Engine, guard: SqliteFileGuard) -> None:
    """Check the file before each new connection opens it (SQLite would create an empty one at a deleted
    file's path) and remember the file the first connection opened."""

    def before_connect(*_: Any) -> None:
        guard.check()

    event.listen(engine, "do_connect", before_connect)
    event.listen(engine, "connect", lambda _conn, _record: guard.remember_opened_file())


def sqlite_file_guard(settings: Settings) -> SqliteFileGuard | None:
    """The guard of the SQLite file the settings name; None for PostgreSQL and an in-memory database."""
    url = make_url(normalize_database_url(settings.database_url))
    if url.get_backend_name() != "sqlite" or (url.database or "") in IN_MEMORY:
        return None
    return SqliteFileGuard(Path(str(url.database)))


def _create_sqlite_engine(url: str, settings: Settings, connections: int, guard: SqliteFileGuard | None) -> Engine:
    if guard is not None:
        guard.path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_ms / 1000},
        pool_size=connections,
        max_overflow=SPARE_CONNECTIONS,
        pool_timeout=settings.sqlite_busy_timeout_ms / 1000,
    )
    event.listen(engine, "connect", lambda conn, _record: _prepare_sqlite_connection(
        conn, settings.sqlite_busy_timeout_ms))
    event.listen(engine, "begin", lambda connection: _begin_sqlite_transaction(connection, guard))
    if guard is not None:
        _guard_file(engine, guard)
    return engine


def read_only_engine(engine: Engine) -> Engine:
    """The engine for read sessions. SQLite: a deferred BEGIN, so pollers never take the write lock.
    PostgreSQL: autocommit, so a read costs its SELECTs alone, not a BEGIN and a ROLLBACK round trip each;
    every statement still reads one consistent snapshot, which is all a page of the API needs."""
    if engine.dialect.name == "sqlite":
        return engine.execution_options(**{BEGIN_MODE_OPTION: "DEFERRED"})
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def create_db_engine(settings: Settings, guard: SqliteFileGuard | None = None) -> Engine:
    url = normalize_database_url(settings.database_url)
    connections = settings.worker_threads
    if url.startswith("sqlite"):
        return _create_sqlite_engine(url, settings, connections, guard)
    # No ping before each checkout: it would cost every request a round trip. A connection the database
    # dropped fails its request with a disconnect, which empties the pool and answers 503 with Retry-After
    # (padbench.server.db.failures), so the retry gets a fresh connection.
    return create_engine(url, pool_size=connections, max_overflow=SPARE_CONNECTIONS, pool_timeout=10)


@dataclass(frozen=True)
class Database:
    """The engine plus two session factories: `write` (BEGIN IMMEDIATE on SQLite) and `read` (deferred).

    On SQLite, `write` sessions carry the process's `WriterLock` in `info`; `writing()` holds it.
    """

    engine: Engine
    write: sessionmaker[Session]
    read: sessionmaker[Session]
    writer_lock: WriterLock | None = field(default=None)
    file_guard: SqliteFileGuard | None = field(default=None)

    @classmethod
    def connect(cls, settings: Settings) -> Database:
        guard = sqlite_file_guard(settings)
        engine = create_db_engine(settings, guard)
        reader = read_only_engine(engine)
        lock = WriterLock(settings.sqlite_busy_timeout_ms / 1000) if engine.dialect.name == "sqlite" else None
        return cls(
            engine=engine,
            write=sessionmaker(engine, expire_on_commit=False, info={WRITE_LOCK_INFO_KEY: lock} if lock else None),
            read=sessionmaker(reader, expire_on_commit=False),
            writer_lock=lock,
            file_guard=guard,
        )

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """One write transaction outside a request (the reaper, maintenance): committed, or rolled back."""
        with self.writer_lock or nullcontext(), self.write.begin() as session:
            yield session

    @property
    def is_postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def dispose(self) -> None:
        self.engine.dispose()
