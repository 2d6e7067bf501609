"""A database out of service under a running server, over real HTTP: a SQLite file corrupted (its pages or
its header), deleted or replaced, a PostgreSQL database dropped or its server stopped. Every route that
touches the database answers 503 JSON naming the problem, with Retry-After; none answers a plain-text 500,
and a deleted file is never recreated empty behind the server's back."""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from padbench.server.db.migrate import upgrade_to_head
from tests.integration.conftest import POSTGRES_ADMIN_URL, LiveServer, empty_postgres, serve
from tests.integration.test_server_jobs import SPEC, claim, register, submit

LEASE = {"lease_token": "x" * 32}
# (who, method, path, body): a route of every resource, reads and writes, the worker's and the admin's.
ROUTES: list[tuple[str | None, str, str, dict | None]] = [
    ("submitter", "GET", "/v1/jobs", None),
    ("submitter", "POST", "/v1/jobs", {"spec": SPEC}),
    ("submitter", "GET", "/v1/jobs/1", None),
    ("submitter", "GET", "/v1/jobs/1/results", None),
    ("submitter", "GET", "/v1/jobs/1/table", None),
    ("submitter", "POST", "/v1/jobs/1/cancel", None),
    ("submitter", "GET", "/v1/compare?ids=1,2", None),
    ("admin", "POST", "/v1/jobs/prune", {"older_than_days": 1}),
    ("worker", "POST", "/v1/workers", {"name": "box-2", "capabilities": {"device": "cpu"}}),
    ("admin", "GET", "/v1/workers", None),
    ("worker", "POST", "/v1/leases", {"worker_id": 1}),
    ("worker", "POST", "/v1/leases/1/heartbeat", LEASE),
    ("worker", "POST", "/v1/leases/1/fail", LEASE | {"error": "boom"}),
    ("viewer", "GET", "/metrics", None),
    (None, "GET", "/healthz", None),
    # No token: the failure limiter counts it in the database, so it cannot answer 401 either.
    (None, "GET", "/v1/jobs", None),
]


def assert_every_route_says(server: LiveServer, reason: str) -> None:
    for who, method, path, body in ROUTES:
        with server.client(who) as http:
            response = http.request(method, path, json=body)
        where = f"{method} {path}"
        assert response.status_code == 503, f"{where}: {response.status_code} {response.text}"
        assert response.headers["content-type"] == "application/json", where
        assert reason in response.json()["detail"], f"{where}: {response.text}"
        assert int(response.headers["retry-after"]) >= 1, where


def with_jobs(server: LiveServer) -> None:
    """A job claimed and one queued: the database has rows on more pages than the first."""
    with server.client("submitter") as user, server.client("worker") as worker:
        for _ in range(30):
            submit(user, SPEC)
        claim(worker, register(worker, "box-1"))


def checkpointed(database_file: Path) -> None:
    """Move the WAL into the main file, as SQLite does on its own every 1,000 pages, so damage to the file
    reaches what the server reads."""
    connection = sqlite3.connect(database_file)
    deadline = time.monotonic() + 60
    try:
        # A checkpoint that meets the server's transaction is busy and moves only part of the WAL: page 1
        # may stay there, and the server would go on reading its intact copy. Tried until it moved it all.
        while (busy := connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]) != 0:
            assert time.monotonic() < deadline, f"the checkpoint stayed busy ({busy})"
            time.sleep(0.05)
    finally:
        connection.close()


def damaged_after_a_checkpoint(database_file: Path, damage: Callable[[Path], None]) -> None:
    """`damage` the file just after a checkpoint, as a real outage would meet the server.

    Two things would otherwise hide the damage from a live server. A write between the checkpoint and the
    damage (a worker's poll) would put page 1 back in the WAL, where the server would go on reading its
    intact copy: SQLite's write lock is held from the checkpoint to the damage. And a pooled connection that
    read after the checkpoint keeps its pages cached for as long as the WAL's index is unchanged (SQLite
    checks nothing else in WAL mode): the lock's transaction rewrites one row of alembic_version (not on
    page 1) to its own value and commits after the damage, which changes the index, so every connection
    reads the damaged file on its next transaction."""
    wal = database_file.with_name(database_file.name + "-wal")
    connection = sqlite3.connect(database_file, isolation_level=None)
    deadline = time.monotonic() + 60
    try:
        while True:
            checkpointed(database_file)
            connection.execute("BEGIN IMMEDIATE")  # writers wait until the damage is done
            if not wal.exists() or wal.stat().st_size == 0:
                break
            connection.execute("ROLLBACK")  # a write came between the checkpoint and the lock: again
            assert time.monotonic() < deadline, "the WAL never stayed empty after a checkpoint"
        # Changed and changed back: SQLite skips a write that leaves a row's bytes as they were.
        connection.execute("UPDATE alembic_version SET version_num = version_num || '.'")
        connection.execute("UPDATE alembic_version SET version_num = substr(version_num, 1, length(version_num) - 1)")
        damage(database_file)
        connection.execute("COMMIT")
    finally:
        connection.close()


def overwrite_pages(database_file: Path) -> None:
    with database_file.open("r+b") as file:
        file.seek(4096)
        file.write(os.urandom(database_file.stat().st_size - 4096))


def overwrite_header(database_file: Path) -> None:
    with database_file.open("r+b") as file:
        file.write(os.urandom(100))


def replace_with_a_copy(database_file: Path) -> None:
    copy = database_file.with_suffix(".copy")
    copy.write_bytes(database_file.read_bytes())
    copy.replace(database_file)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "pages": (overwrite_pages, "the database file is corrupted"),
    "header": (overwrite_header, "the database file is not a SQLite database"),
    "deleted": (Path.unlink, "the database file was deleted or replaced"),
    "replaced": (replace_with_a_copy, "the database file was deleted or replaced"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_sqlite_file_answers_503_with_the_reason_on_every_route(tmp_path: Path, damage: str) -> None:
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path) as server:
        with_jobs(server)
        do_damage, reason = DAMAGE[damage]
        damaged_after_a_checkpoint(database_file, do_damage)
        assert_every_route_says(server, reason)
        if damage == "deleted":
            assert not database_file.exists()  # no new connection made an empty database in its place


@pytest.mark.postgres
def test_a_dropped_postgresql_database_answers_503_with_the_reason_on_every_route(
        tmp_path: Path, postgres_database: str) -> None:
    name = f"padbench_dropped_{secrets.token_hex(4)}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(postgres_database).set(database=name).render_as_string(hide_password=False)
    migrator = create_engine(url)
    upgrade_to_head(migrator)
    migrator.dispose()
    try:
        with serve(url, tmp_path) as server:
            with_jobs(server)
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            with server.client("submitter") as user:  # the first request meets a connection the drop closed
                first = user.get("/v1/jobs")
            assert first.status_code == 503 and first.headers["retry-after"], first.text
            assert_every_route_says(server, "the database cannot be reached")
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def test_a_bug_answers_json_not_plain_text(live_server: LiveServer) -> None:
    """Whatever goes wrong, a client reads a JSON `detail`: here the database lost a table."""
    with live_server.database.engine.begin() as connection:
        connection.execute(text("DROP TABLE job_requirements"))
    with live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": SPEC})
    assert response.status_code == 500 and response.headers["content-type"] == "application/json"
    assert "detail" in response.json()


class PostgresDoor:
    """A TCP forwarder to PostgreSQL that the test can shut, as if the database server stopped: its open
    connections are cut and new ones refused."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open_sockets: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with suppress(OSError):  # the listener closed: the door is shut
            while True:
                client, _ = self.listener.accept()
                if self.closed.is_set():
                    client.close()
                    return
                upstream = socket.create_connection(self.target)
                self.open_sockets += [client, upstream]
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def shut(self) -> None:
        self.closed.set()
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept(); close alone may not
        self.listener.close()
        for sock in self.open_sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.mark.postgres
def test_a_stopped_postgresql_answers_503_with_the_reason_on_every_route(tmp_path: Path,
                                                                          postgres_database: str) -> None:
    empty_postgres(postgres_database)
    url = make_url(postgres_database)
    door = PostgresDoor((url.host or "127.0.0.1", url.port or 5432))
    through_the_door = url.set(host="127.0.0.1", port=door.port).render_as_string(hide_password=False)
    with serve(through_the_door, tmp_path) as server:
        with_jobs(server)
        door.shut()
        with server.client("submitter") as user:  # the first request meets a connection cut under it
            first = user.get("/v1/jobs")
        assert first.status_code == 503 and first.headers["retry-after"], first.text
        assert_every_route_says(server, "the database cannot be reached")
