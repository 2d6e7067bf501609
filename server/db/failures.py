"""What a database error means for the caller: the disk is full, the database is busy for a moment, or
it is out of service (corrupted, deleted, unreadable, its server stopped or the database dropped).

SQLite reports these through its result codes (Python's sqlite3 exposes them as `sqlite_errorcode`),
PostgreSQL through SQLSTATE (psycopg's `sqlstate`); SQLAlchemy wraps both in DBAPIError, and raises its
own TimeoutError when no pooled connection frees up within the pool's timeout. A connection psycopg could
not open at all (refused, no route) carries no SQLSTATE. Anything else is not a condition of the database
but a bug, and is left alone.
"""

from __future__ import annotations

import sqlite3
from enum import Enum

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError


class DatabaseFailure(Enum):
    disk_full = "the database's disk is full"
    busy = "the database is busy"
    no_connection_free = "every database connection is in use"
    connection_lost = "the database closed this server's connection (restarted?); it has been replaced"
    # Out of service until an administrator acts: each says what is wrong and what to do.
    corrupt = "the database file is corrupted; restore it from a backup (padbench db restore)"
    not_a_database = ("the database file is not a SQLite database (overwritten?); restore it from a backup "
                      "(padbench db restore)")
    cannot_open = "the database file cannot be opened (deleted, or its directory unreadable)"
    read_only = "the database is read-only (its file or directory not writable?)"
    io_error = "the database's disk failed to read or write (I/O error)"
    # psycopg gives no SQLSTATE for a connection it could not open, whatever the server's reason.
    unreachable = "the database cannot be reached (its server stopped? the database dropped? the connection refused?)"
    missing = "the database does not exist on its server (dropped?)"
    unlinked = ("the database file was deleted or replaced while the server ran: what it acknowledges now would be "
                "lost; restart the server (after restoring the file from a backup if it was deleted)")

    @property
    def is_outage(self) -> bool:
        """True when the database stays unusable until someone repairs it (not a moment's contention)."""
        return self in OUTAGES


# SQLite primary result codes (https://www.sqlite.org/rescode.html). An extended code carries its primary
# code in the low byte, e.g. SQLITE_BUSY_SNAPSHOT (517) is a SQLITE_BUSY.
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 5, 6, 8, 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 13, 14, 26
SQLITE_FAILURES = {
    SQLITE_FULL: DatabaseFailure.disk_full,
    SQLITE_BUSY: DatabaseFailure.busy,  # "database is locked": another writer outlasted the busy timeout
    SQLITE_LOCKED: DatabaseFailure.busy,
    SQLITE_READONLY: DatabaseFailure.read_only,
    SQLITE_IOERR: DatabaseFailure.io_error,
    SQLITE_CORRUPT: DatabaseFailure.corrupt,
    SQLITE_CANTOPEN: DatabaseFailure.cannot_open,
    SQLITE_NOTADB: DatabaseFailure.not_a_database,
}
# SQLite's own text for those codes: Python 3.10's sqlite3 errors carry the text but not the code.
SQLITE_MESSAGES = {"database or disk is full": SQLITE_FULL, "database is locked": SQLITE_BUSY,
                   "database table is locked": SQLITE_LOCKED, "attempt to write a readonly database": SQLITE_READONLY,
                   "disk I/O error": SQLITE_IOERR, "database disk image is malformed": SQLITE_CORRUPT,
                   "unable to open database file": SQLITE_CANTOPEN, "file is not a database": SQLITE_NOTADB}
# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html).
POSTGRESQL_FAILURES = {
    "53100": DatabaseFailure.disk_full,  # disk_full
    "55P03": DatabaseFailure.busy,  # lock_not_available
    "40P01": DatabaseFailure.busy,  # deadlock_detected: this transaction was the one rolled back
    "40001": DatabaseFailure.busy,  # serialization_failure
    "53300": DatabaseFailure.busy,  # too_many_connections
    "57P03": DatabaseFailure.busy,  # cannot_connect_now: the server is starting up or shutting down
    "57P01": DatabaseFailure.connection_lost,  # admin_shutdown: stopped, or the database dropped WITH (FORCE)
    "57P02": DatabaseFailure.connection_lost,  # crash_shutdown
    "3D000": DatabaseFailure.missing,  # invalid_catalog_name: the database named in the URL does not exist
    "08000": DatabaseFailure.unreachable,  # connection_exception and its subclasses below
    "08001": DatabaseFailure.unreachable,
    "08003": DatabaseFailure.unreachable,
    "08004": DatabaseFailure.unreachable,
    "08006": DatabaseFailure.unreachable,
}
DAMAGED_FILE = frozenset({DatabaseFailure.corrupt, DatabaseFailure.not_a_database})
OUTAGES = frozenset({DatabaseFailure.corrupt, DatabaseFailure.not_a_database, DatabaseFailure.cannot_open,
                     DatabaseFailure.read_only, DatabaseFailure.io_error, DatabaseFailure.unreachable,
                     DatabaseFailure.missing, DatabaseFailure.unlinked})


class DatabaseCondition(Exception):
    """Raised by the server's own checks (not the driver) when the database cannot be used: `failure` says why."""

    def __init__(self, failure: DatabaseFailure) -> None:
        super().__init__(failure.value)
        self.failure = failure


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
    if isinstance(error, DatabaseCondition):
        return error.failure
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
    sqlstate = getattr(original, "sqlstate", None)
    if sqlstate is None and isinstance(error, OperationalError):
        return DatabaseFailure.unreachable  # psycopg found no server to talk to: refused, timed out, no route
    return POSTGRESQL_FAILURES.get(sqlstate or "")


def describe(error: BaseException) -> str:
    """A short reason fit for an unauthenticated caller: the condition, else the error's type and code
    (never its message, which may name hosts, users or SQL)."""
    failure = classify(error)
    if failure is not None:
        return failure.value
    code = driver_code(error)
    return f"{type(error).__name__} ({code})" if code else type(error).__name__
