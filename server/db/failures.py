"""What a database error means for the caller: the disk is full, or the database is busy for a moment.

SQLite reports these through its result codes (Python's sqlite3 exposes them as `sqlite_errorcode`),
PostgreSQL through SQLSTATE (psycopg's `sqlstate`); SQLAlchemy wraps both in DBAPIError, and raises its
own TimeoutError when no pooled connection frees up within the pool's timeout. Anything else is not a
condition of the database but a bug, and is left alone.
"""

from __future__ import annotations

import sqlite3
from enum import Enum

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError


class DatabaseFailure(Enum):
    disk_full = "the database's disk is full"
    busy = "the database is busy"
    no_connection_free = "every database connection is in use"
    connection_lost = "the database closed this server's connection (restarted?); it has been replaced"


# SQLite primary result codes (https://www.sqlite.org/rescode.html). An extended code carries its primary
# code in the low byte, e.g. SQLITE_BUSY_SNAPSHOT (517) is a SQLITE_BUSY.
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL = 5, 6, 13
SQLITE_FAILURES = {
    SQLITE_FULL: DatabaseFailure.disk_full,
    SQLITE_BUSY: DatabaseFailure.busy,  # "database is locked": another writer outlasted the busy timeout
    SQLITE_LOCKED: DatabaseFailure.busy,
}
# SQLite's own text for those codes: Python 3.10's sqlite3 errors carry the text but not the code.
SQLITE_MESSAGES = {"database or disk is full": SQLITE_FULL, "database is locked": SQLITE_BUSY,
                   "database table is locked": SQLITE_LOCKED}
# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
POSTGRESQL_FAILURES = {
    "53100": DatabaseFailure.disk_full,  # disk_full
    "55P03": DatabaseFailure.busy,  # lock_not_available
    "40P01": DatabaseFailure.busy,  # deadlock_detected: this transaction was the one rolled back
    "40001": DatabaseFailure.busy,  # serialization_failure
    "53300": DatabaseFailure.busy,  # too_many_connections
    "57P03": DatabaseFailure.busy,  # cannot_connect_now: the server is starting up or shutting down
}


def sqlite_primary_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11 and later
    return code & 0xFF if isinstance(code, int) else SQLITE_MESSAGES.get(str(error))


def driver_code(error: BaseException) -> str | None:
    """The driver's own name for the error (`SQLITE_FULL`, `SQLSTATE 53100`), when it gives one."""
    original = error.orig if isinstance(error, DBAPIError) else None
    name = getattr(original, "sqlite_errorname", None)  # Python 3.11 and later
    sqlstate = getattr(original, "sqlstate", None)  # psycopg
    return name or (f"SQLSTATE {sqlstate}" if sqlstate else None)


def classify(error: BaseException) -> DatabaseFailure | None:
    """The condition of the database that `error` reports, or None when it reports none of them."""
    if isinstance(error, PoolTimeoutError):
        return DatabaseFailure.no_connection_free
    if not isinstance(error, DBAPIError):
        return None
    if error.connection_invalidated:  # SQLAlchemy saw a disconnect and emptied the pool: the next try reconnects
        return DatabaseFailure.connection_lost
    original = error.orig
    if isinstance(original, sqlite3.Error):
        code = sqlite_primary_code(original)
        return SQLITE_FAILURES.get(code) if code is not None else None
    return POSTGRESQL_FAILURES.get(getattr(original, "sqlstate", None) or "")


def describe(error: BaseException) -> str:
    """A short reason fit for an unauthenticated caller: the condition, else the error's type and code
    (never its message, which may name hosts, users or SQL)."""
    failure = classify(error)
    if failure is not None:
        return failure.value
    code = driver_code(error)
    return f"{type(error).__name__} ({code})" if code else type(error).__name__
