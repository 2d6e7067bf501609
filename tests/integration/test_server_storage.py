"""The server's storage under strain, over real HTTP: `/healthz` proves the database accepts a write and
has room; a full SQLite database answers 507 and keeps everything stored before it filled; a database
locked by another writer answers 503 with Retry-After.

The full disk is real: the server's SQLite connections get a page limit (PRAGMA max_page_count) just
above the database's size, so inserts fail with SQLITE_FULL exactly as on a full filesystem.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event, select

from padbench.server.db.models import HealthProbe
from tests.integration.conftest import LiveServer, serve

SPEC = {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}
HEALTHY_KEYS = {"status", "database", "database_write", "disk_free_bytes", "integrity", "recent_failures"}


def on_every_server_connection(server: LiveServer, pragma: Callable[[Any], str]) -> None:
    """Run a PRAGMA on each of the server's SQLite connections from now on (pooled ones are dropped)."""
    def run(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(pragma(dbapi_connection))

    event.listen(server.database.engine, "connect", run)
    server.database.engine.dispose()


def page_limit_just_above_the_current_size(dbapi_connection: Any) -> str:
    pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
    return f"PRAGMA max_page_count = {pages + 2}"


def test_healthz_reports_the_write_and_the_room_left(any_live_server: LiveServer) -> None:
    with any_live_server.client() as anonymous:
        first, second = anonymous.get("/healthz"), anonymous.get("/healthz")
    assert first.status_code == second.status_code == 200
    body = second.json()
    assert set(body) == HEALTHY_KEYS and body["status"] == body["database"] == body["database_write"] == "ok"
    is_sqlite = any_live_server.database.engine.dialect.name == "sqlite"
    assert (isinstance(body["disk_free_bytes"], int) and body["disk_free_bytes"] > 0) if is_sqlite \
        else body["disk_free_bytes"] is None
    with any_live_server.database.read() as session:
        probes = session.scalars(select(HealthProbe)).all()
    assert [probe.id for probe in probes] == [1]  # one row, rewritten


def test_healthz_is_503_when_free_space_is_below_the_setting(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, min_free_disk_bytes=2**62) as server:
        response = server.client().get("/healthz")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
    assert "PADBENCH_MIN_FREE_DISK_BYTES" in response.json()["detail"]


def test_healthz_is_503_when_the_database_refuses_writes(live_server: LiveServer) -> None:
    on_every_server_connection(live_server, lambda _connection: "PRAGMA query_only = ON")
    response = live_server.client().get("/healthz")
    body = response.json()
    assert response.status_code == 503 and body["database"] == "ok"
    assert body["database_write"].startswith("the database is read-only")
    assert "database write: the database is read-only" in body["detail"]


def test_a_full_database_answers_507_and_keeps_what_it_stored(live_server: LiveServer) -> None:
    submitter = live_server.client("submitter")
    stored = [submitter.post("/v1/jobs", json={"spec": SPEC}).json()["id"] for _ in range(3)]
    on_every_server_connection(live_server, page_limit_just_above_the_current_size)
    for _ in range(500):
        response = submitter.post("/v1/jobs", json={"spec": SPEC})
        if response.status_code != 201:
            break
        stored.append(response.json()["id"])
    assert response.status_code == 507, response.text
    assert response.headers["content-type"] == "application/json"
    assert "the database's disk is full" in response.json()["detail"]

    health = live_server.client().get("/healthz")
    assert health.status_code == 503 and health.json()["disk_free_bytes"] < 256 * 1024 * 1024
    assert "PADBENCH_MIN_FREE_DISK_BYTES" in health.json()["detail"]

    assert [submitter.get(f"/v1/jobs/{job_id}").status_code for job_id in stored] == [200] * len(stored)
    assert submitter.get("/v1/jobs", params={"limit": 500}).json()["total"] == len(stored)


def test_a_database_locked_by_another_writer_answers_503_with_retry_after(tmp_path: Path) -> None:
    database_file = tmp_path / "db.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path, sqlite_busy_timeout_ms=0) as server:
        holder = sqlite3.connect(database_file, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        try:
            response = server.client("submitter").post("/v1/jobs", json={"spec": SPEC})
        finally:
            holder.close()
        assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
        assert "the database is busy" in response.json()["detail"]
        assert server.client("submitter").post("/v1/jobs", json={"spec": SPEC}).status_code == 201
