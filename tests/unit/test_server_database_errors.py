"""Database errors that are conditions, not bugs: a full disk is 507, a busy database or an exhausted
connection pool 503 with Retry-After, a database out of service (corrupted, unreachable) 503 with a longer
one, each with a JSON reason; any other database error is left alone.
SQLite's errors are real ones, provoked on a small database; PostgreSQL's are psycopg's own classes."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
from pathlib import Path

import psycopg.errors
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.requests import Request

from padbench.server.api.errors import DATABASE_RETRY_AFTER_SECONDS, OUTAGE_RETRY_AFTER_SECONDS, database_error_handler
from padbench.server.db.engine import DatabaseBusy
from padbench.server.db.failures import DatabaseCondition, DatabaseFailure, classify, describe


def sqlite_full_error() -> DBAPIError:
    """The error SQLite raises when an insert needs a page past the database's page limit."""
    engine = create_engine("sqlite://")
    with engine.connect() as connection:
        connection.execute(text("CREATE TABLE t (x TEXT)"))
        pages = connection.execute(text("PRAGMA page_count")).scalar_one()
        connection.execute(text(f"PRAGMA max_page_count = {pages + 1}"))
        with pytest.raises(OperationalError) as raised:
            for _ in range(100):
                connection.execute(text("INSERT INTO t VALUES (:x)"), {"x": "x" * 1000})
    return raised.value


def sqlite_locked_error(tmp_path: Path) -> DBAPIError:
    """The error a writer gets when another connection holds the write lock past its busy timeout (0 here)."""
    holder = sqlite3.connect(tmp_path / "db.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    engine = create_engine(f"sqlite:///{tmp_path / 'db.sqlite3'}", connect_args={"timeout": 0})
    try:
        with engine.connect() as connection, pytest.raises(OperationalError) as raised:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    finally:
        holder.close()
        engine.dispose()
    return raised.value


def wrapped(driver_error: Exception) -> DBAPIError:
    return OperationalError("INSERT INTO jobs …", {}, driver_error)


def test_sqlite_full_and_locked_are_recognised(tmp_path: Path) -> None:
    full = sqlite_full_error()
    assert classify(full) is DatabaseFailure.disk_full and describe(full) == "the database's disk is full"
    assert classify(sqlite_locked_error(tmp_path)) is DatabaseFailure.busy


def test_sqlite_errors_without_a_code_are_recognised_by_their_text() -> None:
    """Python 3.10's sqlite3 errors carry SQLite's message but not its result code."""
    assert classify(wrapped(sqlite3.OperationalError("database or disk is full"))) is DatabaseFailure.disk_full
    assert classify(wrapped(sqlite3.OperationalError("database is locked"))) is DatabaseFailure.busy
    assert classify(wrapped(sqlite3.OperationalError("no such table: jobs"))) is None


def test_postgresql_disk_full_and_lock_errors_are_recognised_by_sqlstate() -> None:
    assert classify(wrapped(psycopg.errors.DiskFull("could not extend file"))) is DatabaseFailure.disk_full
    assert classify(wrapped(psycopg.errors.LockNotAvailable("could not obtain lock"))) is DatabaseFailure.busy
    bug = ProgrammingError("SELECT", {}, psycopg.errors.UndefinedTable('relation "jobz" does not exist'))
    assert classify(bug) is None
    assert describe(bug) == "ProgrammingError (SQLSTATE 42P01)"  # the code, never the message


def test_an_exhausted_pool_is_recognised() -> None:
    assert classify(PoolTimeoutError("QueuePool limit reached")) is DatabaseFailure.no_connection_free


def dropped_connection() -> DBAPIError:
    """What SQLAlchemy raises when the database closed a pooled connection (it marks the error invalidated)."""
    return OperationalError("SELECT …", {}, psycopg.OperationalError("server closed the connection unexpectedly"),
                            connection_invalidated=True)


def test_a_dropped_connection_is_recognised() -> None:
    assert classify(dropped_connection()) is DatabaseFailure.connection_lost


def handle(error: Exception) -> tuple[int, dict[str, str], dict[str, str]]:
    scope = {"type": "http", "method": "POST", "path": "/v1/jobs", "headers": [], "query_string": b"",
             "scheme": "http", "server": ("127.0.0.1", 8000)}
    response = asyncio.run(database_error_handler(Request(scope), error))
    return response.status_code, dict(response.headers), json.loads(bytes(response.body))


def test_a_full_disk_is_507_with_the_reason() -> None:
    status, _, body = handle(sqlite_full_error())
    assert status == 507 and "disk is full" in body["detail"] and "nothing of this request was stored" in body["detail"]


@pytest.mark.parametrize("error", [PoolTimeoutError("QueuePool limit reached"), dropped_connection(),
                                   wrapped(sqlite3.OperationalError("database is locked"))])
def test_a_busy_database_is_503_with_retry_after(error: Exception) -> None:
    status, headers, body = handle(error)
    assert status == 503 and int(headers["retry-after"]) >= 1 and "retry in" in body["detail"]


def test_other_database_errors_are_left_to_the_server_error_handling() -> None:
    bug = ProgrammingError("SELECT", {}, psycopg.errors.UndefinedTable("relation does not exist"))
    with pytest.raises(ProgrammingError):
        handle(bug)


def corrupted_sqlite_error(tmp_path: Path, damage_from: int) -> DBAPIError:
    """The error SQLite raises reading a file whose bytes from `damage_from` on were overwritten."""
    path = tmp_path / f"damaged-from-{damage_from}.sqlite3"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x TEXT)")
        connection.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 100)
    connection.close()
    with path.open("r+b") as file:
        file.seek(damage_from)
        file.write(b"\xa5" * (path.stat().st_size - damage_from))
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection, pytest.raises(DBAPIError) as raised:
            connection.execute(text("SELECT count(*), max(x) FROM t")).all()
    finally:
        engine.dispose()
    return raised.value


def test_a_corrupted_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    pages = corrupted_sqlite_error(tmp_path, damage_from=4096)
    header = corrupted_sqlite_error(tmp_path, damage_from=0)
    assert classify(pages) is DatabaseFailure.corrupt and classify(header) is DatabaseFailure.not_a_database
    assert all(failure.is_outage for failure in (classify(pages), classify(header)))


def test_a_postgresql_server_that_refuses_the_connection_is_unreachable() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    engine = create_engine(f"postgresql+psycopg://nobody@127.0.0.1:{port}/none")
    with pytest.raises(OperationalError) as raised, engine.connect():
        pass
    assert classify(raised.value) is DatabaseFailure.unreachable
    assert classify(wrapped(psycopg.errors.InvalidCatalogName("database does not exist"))) is DatabaseFailure.missing


@pytest.mark.parametrize("error", [DatabaseCondition(DatabaseFailure.unlinked),
                                   wrapped(sqlite3.DatabaseError("database disk image is malformed"))])
def test_an_outage_is_503_with_the_reason_and_a_longer_retry_after(error: Exception) -> None:
    status, headers, body = handle(error)
    assert status == 503 and int(headers["retry-after"]) == OUTAGE_RETRY_AFTER_SECONDS
    assert body["detail"].startswith(classify(error).value)  # type: ignore[union-attr]


def test_this_processs_own_write_lock_timing_out_is_503() -> None:
    status, headers, _ = handle(DatabaseBusy())
    assert status == 503 and int(headers["retry-after"]) == DATABASE_RETRY_AFTER_SECONDS
