"""The engine and session factories, built when the app starts (never at import).

SQLite is configured the way a queue needs it: WAL (readers never block the writer), a busy timeout,
foreign keys on, and write transactions begun with `BEGIN IMMEDIATE`. A deferred transaction that
later upgrades to a write fails at once with "database is locked", ignoring the busy timeout; taking
the write lock at BEGIN makes concurrent writers queue politely instead. Read-only sessions begin
DEFERRED so pollers never take the write lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from padbench.server.core.config import Settings

BEGIN_MODE_OPTION = "padbench_sqlite_begin"


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


def _begin_sqlite_transaction(connection: Connection) -> None:
    mode = connection.get_execution_options().get(BEGIN_MODE_OPTION, "IMMEDIATE")
    connection.exec_driver_sql(f"BEGIN {mode}")


def _create_sqlite_engine(url: str, settings: Settings) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": settings.sqlite_busy_timeout_ms / 1000},
        pool_size=10,
        max_overflow=30,
    )
    event.listen(engine, "connect", lambda conn, _record: _prepare_sqlite_connection(
        conn, settings.sqlite_busy_timeout_ms))
    event.listen(engine, "begin", _begin_sqlite_transaction)
    return engine


def create_db_engine(settings: Settings) -> Engine:
    url = normalize_database_url(settings.database_url)
    if url.startswith("sqlite"):
        return _create_sqlite_engine(url, settings)
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=30)


@dataclass(frozen=True)
class Database:
    """The engine plus two session factories: `write` (BEGIN IMMEDIATE on SQLite) and `read` (deferred)."""

    engine: Engine
    write: sessionmaker[Session]
    read: sessionmaker[Session]

    @classmethod
    def connect(cls, settings: Settings) -> Database:
        engine = create_db_engine(settings)
        reader = engine.execution_options(**{BEGIN_MODE_OPTION: "DEFERRED"})
        return cls(
            engine=engine,
            write=sessionmaker(engine, expire_on_commit=False),
            read=sessionmaker(reader, expire_on_commit=False),
        )

    @property
    def is_postgresql(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def dispose(self) -> None:
        self.engine.dispose()
