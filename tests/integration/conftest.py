"""Live servers on loopback for integration tests: the real app under uvicorn, in a thread, with the options
`padbench server` gives uvicorn (`uvicorn_options`), so what production trusts or limits, tests do too.

`live_server` runs on a fresh SQLite file per test; `live_server_pg` on a PostgreSQL database created
for this test run at 127.0.0.1:5432 (dropped afterwards; skipped only when nothing answers there);
`any_live_server` is both, one after the other. Each yields a `LiveServer`: the base URL, a token per
principal, and the app's own `Database` for faking time in SQL. `queue_db` is the same two databases
without HTTP, for tests of `padbench.server.queue` itself.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text, update
from sqlalchemy.engine import make_url

from padbench.contract.api import Capabilities
from padbench.contract.kinds import JOB_RESULT_ADAPTER, JOB_SPEC_ADAPTER, parse_job_spec
from padbench.contract.results import Environment
from padbench.kinds.attention.contract import AttentionJobSpec, AttentionResult
from padbench.kinds.padding.contract import PaddingResult
from padbench.server import queue
from padbench.server.cli import uvicorn_options
from padbench.server.core.config import Settings
from padbench.server.core.security import Role, token_file_line
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.migrate import upgrade_to_head
from padbench.server.db.models import Job
from padbench.server.db.workers import register_worker
from padbench.server.main import create_app
from padbench.server.requirements import job_requirements, offered_capabilities, stored_gpus
from padbench.tokens import random_token

POSTGRES_ADMIN_URL = os.environ.get("PADBENCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# Principal key → (role, name). Two of each ordinary role, to test ownership.
PRINCIPALS: dict[str, tuple[str, str]] = {
    "submitter": ("submitter", "alice"),
    "submitter2": ("submitter", "bob"),
    "worker": ("worker", "gpu-box-1"),
    "worker2": ("worker", "gpu-box-2"),
    "admin": ("admin", "root"),
    "viewer": ("viewer", "dashboard"),
}
TABLES = ("auth_failures, baselines, gang_members, health_probe, job_attempts, job_regressions, job_results, "
          "job_requirements, jobs, workers")


# --- direct queue helpers (tests of padbench.server.queue, without HTTP) ----------------------------------------

# As a CPU worker lists them: its kernels and the attention families they implement.
CPU_KERNELS = ["eager", "eager-block-mask", "sdpa", "sdpa-block-mask", "flex", "flex-padding-mask",
               "flex-document-mask"]


def submit(database: Database, document: dict | None = None, submitter: str = "alice") -> int:
    spec = parse_job_spec(document or {"device": "cpu", "dtype": "fp32", "attention": "sdpa"})
    with database.write.begin() as session:
        return queue.insert_job(session, kind=spec.kind, name=spec.name, submitter=submitter, max_attempts=3,
                                spec=JOB_SPEC_ADAPTER.dump_python(spec, mode="json"),
                                requirements=job_requirements(spec), gpus=stored_gpus(spec), nodes=spec.nodes)


def add_worker(
    database: Database, name: str, kernels: list[str] = CPU_KERNELS, device: str = "cpu",
    job_kinds: tuple[str, ...] = ("padding", "attention"),
) -> tuple[int, set]:
    capabilities = Capabilities(device=device, kernels=kernels, job_kinds=list(job_kinds))
    with database.write.begin() as session:
        worker, _ = register_worker(session, name=name, principal="test", capabilities=capabilities.model_dump())
    return worker.id, offered_capabilities(capabilities)


def claim(database: Database, worker: tuple[int, set]) -> Job | None:
    with database.write.begin() as session:
        return queue.claim_next_job(session, worker_id=worker[0], offered=worker[1], lease_seconds=60)


def expire_lease(database: Database, job_id: int) -> None:
    """Fake time in SQL: the lease ran out a second ago (by the database's own clock)."""
    with database.write.begin() as session:
        session.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=db_now(-1)))


def reap(database: Database) -> int:
    with database.write.begin() as session:
        return queue.requeue_expired_leases(session, grace_seconds=0)


def job_row(database: Database, job_id: int) -> Job:
    with database.read() as session:
        return session.get_one(Job, job_id)


def result_document(spec_document: dict[str, Any]) -> dict[str, Any]:
    """A contract-valid result for a job (a tiny, hand-made one: what the engine measures is not under test)."""
    spec = parse_job_spec(spec_document)
    environment = Environment(hostname="test-host", device="cpu", python="3.11", torch="2.13",
                              started_at="2026-11-21T12:00:00Z")
    if isinstance(spec, AttentionJobSpec):
        result = AttentionResult(spec=spec, environment=environment, cells=[])
    else:
        result = PaddingResult(spec=spec, environment=environment, model_parameters=1_000_000,
                               flops_per_token=6_000_000.0, num_sequences=10, real_tokens_total=970, strategies=[])
    return JOB_RESULT_ADAPTER.dump_python(result, mode="json")


# --- live servers ---------------------------------------------------------------------------------------

@dataclass
class LiveServer:
    base_url: str
    tokens: dict[str, str]  # principal key (see PRINCIPALS) → bearer token
    database: Database  # the server's own engine: fake time with UPDATEs through it
    tokens_file: Path

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def client(self, who: str | None = None) -> httpx.Client:
        headers = self.headers(who) if who else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(30.0, connect=5.0))


def write_tokens_file(path: Path) -> dict[str, str]:
    tokens = {key: random_token() for key in PRINCIPALS}
    lines = [token_file_line(Role(role), name, tokens[key]) for key, (role, name) in PRINCIPALS.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tokens


def loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serve(database_url: str, workdir: Path, **settings: Any) -> Iterator[LiveServer]:
    """The real app under uvicorn on a free loopback port, in a thread; stopped on exit."""
    tokens_file = workdir / "tokens"
    tokens = write_tokens_file(tokens_file)
    # No grace past a lease's deadline unless a test sets one: tests fake an expired lease a second ago.
    config = Settings(database_url=database_url, tokens_file=tokens_file, **{"lease_grace_seconds": 0, **settings})
    app = create_app(config)
    sock = loopback_socket()
    server = uvicorn.Server(uvicorn.Config(app, **uvicorn_options(config, "warning"), lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        port = sock.getsockname()[1]
        yield LiveServer(f"http://127.0.0.1:{port}", tokens, app.state.database, tokens_file)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def port_answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run; dropped at the end."""
    url = make_url(POSTGRES_ADMIN_URL)
    if not port_answers(url.host or "127.0.0.1", url.port or 5432):
        pytest.skip(f"no PostgreSQL answers at {url.host}:{url.port}")
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    name = f"padbench_test_{secrets.token_hex(6)}"
    with admin.connect() as connection:  # anything failing past this point is a real failure, not a skip
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def empty_postgres(url: str) -> None:
    """Migrate (first time) and empty every table, so each test starts from nothing."""
    database = Database.connect(Settings(database_url=url))
    try:
        upgrade_to_head(database.engine)
        with database.engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))
    finally:
        database.dispose()


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[LiveServer]:
    with serve(f"sqlite:///{tmp_path / 'padbench.sqlite3'}", tmp_path) as server:
        yield server


@pytest.fixture
def live_server_pg(tmp_path: Path, postgres_database: str) -> Iterator[LiveServer]:
    empty_postgres(postgres_database)
    with serve(postgres_database, tmp_path) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def any_live_server(request: pytest.FixtureRequest) -> LiveServer:
    return request.getfixturevalue("live_server" if request.param == "sqlite" else "live_server_pg")


def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_file: str) -> str:
    """For a fixture parametrized "sqlite"/"postgresql": a fresh SQLite file's URL, or the run's PostgreSQL
    database emptied."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / sqlite_file}"
    url: str = request.getfixturevalue("postgres_database")
    empty_postgres(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def queue_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated, empty database (SQLite file or the run's PostgreSQL database), without a server."""
    url = empty_database_url(request, tmp_path, "queue.sqlite3")
    database = Database.connect(Settings(database_url=url))
    upgrade_to_head(database.engine)
    try:
        yield database
    finally:
        database.dispose()
