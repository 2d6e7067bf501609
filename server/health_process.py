"""The health process of `padbench server --health-port PORT`: `/healthz` and `/livez` answered by a process of
its own, on a port of its own.

The API's processes answer both routes too, in an admission lane of their own, but a lane cannot give a probe
the interpreter: a busy API process's request threads hold its one interpreter lock most of the time, and the
event loop that answers a probe waits its turn at it at every step (on 16 cores with 200 clients polling, a
`/healthz` p99 of 0.2-0.4 s). This process holds no request, so its answers wait for nothing.

It answers for the API as the API would: the same database checks (the probe write at most once a second, the
integrity check, the room left), the database failures the API's requests met lately, and, what only a process
beside the API can say, whether each API process's event loop still runs (padbench.server.health_beats): one that
hangs makes `/livez` answer 503, so an orchestrator restarts the server. It serves nothing else and ends when the
server that started it ends.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from multiprocessing.process import BaseProcess
from pathlib import Path

from fastapi import FastAPI

from padbench.server.api.routes import health
from padbench.server.background import running
from padbench.server.core.config import Settings
from padbench.server.db.engine import Database
from padbench.server.db.health import HealthMonitor
from padbench.server.db.integrity import IntegrityWatch
from padbench.server.health_beats import ApiBeats

log = logging.getLogger("padbench.server.health")
# How often the process looks for its parent: a server killed outright (SIGKILL) cannot stop it.
ORPHAN_CHECK_S = 1.0
# How long `padbench server` waits for the health process to listen before giving up on starting.
START_LIMIT_S = 60.0
KEEP_ALIVE_SECONDS = 15


class HealthProcessFailed(Exception):
    """The health process could not start serving: the server does not start without it."""


def create_health_app(settings: Settings, parent_pid: int) -> FastAPI:
    assert settings.health_beats_dir is not None, "the server names the beats' directory before it starts"
    beats = ApiBeats(settings.health_beats_dir, settings.health_stall_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = Database.connect(settings)
        integrity = IntegrityWatch(database, settings.integrity_check_interval_seconds)
        app.state.health = HealthMonitor(database, settings.min_free_disk_bytes, integrity, beats)
        try:
            async with running(integrity.run_periodically(), end_when_orphaned(parent_pid, beats.directory)):
                yield
        finally:
            app.state.health.close()
            database.dispose()

    app = FastAPI(title="padbench health", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.liveness = beats.problems
    app.include_router(health.router)
    return app


async def end_when_orphaned(parent_pid: int, beats_directory: Path) -> None:
    """Stop once the server that started this process has ended without stopping it (killed outright), and
    remove the beats' directory it can no longer remove."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(ORPHAN_CHECK_S)
    log.warning("padbench health: the server (pid %d) has ended; stopping", parent_pid)
    shutil.rmtree(beats_directory, ignore_errors=True)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's own shutdown: the lifespan closes the database


def serve_health(settings: Settings, parent_pid: int, log_level: str) -> None:
    """The health process's main: uvicorn serving the health app on the health port."""
    import uvicorn

    assert settings.health_port is not None
    uvicorn.run(create_health_app(settings, parent_pid), host=settings.host, port=settings.health_port,
                log_level=log_level, http="h11", timeout_keep_alive=KEEP_ALIVE_SECONDS)


@contextmanager
def beats_directory(settings: Settings) -> Iterator[Settings]:
    """The settings the API's processes run with: a private directory for their beats, removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="padbench-health-"))
    try:
        yield settings.model_copy(update={"health_beats_dir": directory})
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def health_process(settings: Settings, log_level: str) -> Iterator[BaseProcess]:
    """The health process, listening once this is entered; stopped when it is left."""
    check_port_free(settings)
    process = multiprocessing.get_context("spawn").Process(
        target=serve_health, args=(settings, os.getpid(), log_level), name="padbench-health", daemon=True)
    process.start()
    try:
        wait_until_listening(settings, process)
        yield process
    finally:
        process.terminate()
        process.join(timeout=10)


def check_port_free(settings: Settings) -> None:
    """Refuse a health port another program holds, before starting: once the process runs, the other program's
    listening socket would answer the readiness check in its place."""
    port = settings.health_port
    assert port is not None
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    try:
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind((settings.host, port))
    except OSError as error:
        raise HealthProcessFailed(f"port {port} (PADBENCH_HEALTH_PORT) on {settings.host} cannot be served: "
                                  f"{error.strerror or error}") from None


def wait_until_listening(settings: Settings, process: BaseProcess, limit_s: float = START_LIMIT_S) -> None:
    port = settings.health_port
    assert port is not None
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if not process.is_alive():
            raise HealthProcessFailed(f"the health process ended as it started (exit code {process.exitcode}); "
                                      f"is port {port} (PADBENCH_HEALTH_PORT) free on {settings.host}?")
        try:
            socket.create_connection((connect_host(settings.host), port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise HealthProcessFailed(f"the health process was not listening on port {port} after {limit_s:g} s")


def connect_host(host: str) -> str:
    """Where to reach a server bound to `host` from this machine: a wildcard address binds loopback too."""
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
