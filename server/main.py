"""The app factory: `create_app(settings)` builds a FastAPI app; nothing touches the database at import.

At start-up (the lifespan) the engine is created, migrations are applied, the worker threads are sized
to the admission lanes (each admitted request uses at most one thread and one pooled connection at a time,
and the pool has one per thread), and a reaper task begins returning expired leases to the queue every few
seconds (claims also run it first, so the queue is correct even if the task lags) and, with
PADBENCH_RETENTION_DAYS set, removing old finished jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from anyio import to_thread
from fastapi import APIRouter, FastAPI
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool

import padbench
from padbench.contract.api import API_PREFIX
from padbench.server import queue
from padbench.server.api.access_log import quiet_access_log
from padbench.server.api.admission import AdmissionMiddleware, LaneLimits
from padbench.server.api.auth_gate import AuthGateMiddleware
from padbench.server.api.body_limit import BodySizeLimitMiddleware
from padbench.server.api.errors import install_error_handlers
from padbench.server.api.responses import EVERY_V1_ROUTE, error_responses
from padbench.server.api.routes import baselines, compare, gangs, health, history, jobs, leases, workers
from padbench.server.background import running
from padbench.server.core.config import Settings
from padbench.server.core.security import TokenFileError, TokenStore, read_token_file
from padbench.server.db import auth_failures
from padbench.server.db.auth_failures import FailureLimits
from padbench.server.db.engine import Database
from padbench.server.db.failures import DatabaseCondition, describe
from padbench.server.db.health import HealthMonitor
from padbench.server.db.integrity import IntegrityWatch
from padbench.server.db.migrate import upgrade_to_head
from padbench.server.db.recent_failures import RecentFailures
from padbench.server.health_beats import beat_periodically
from padbench.server.metrics import install_metrics
from padbench.server.retention import Retention
from padbench.server.web.pages import install_web

log = logging.getLogger("padbench.server")


def load_tokens(settings: Settings) -> TokenStore:
    if settings.tokens_file is None:
        raise TokenFileError(
            "PADBENCH_TOKENS_FILE is not set: point it at a file with one `role:name:token` line per token "
            "(roles: submitter, worker, admin, viewer), or run `padbench server --dev` for generated tokens"
        )
    return read_token_file(settings.tokens_file)


def reap_once(database: Database, settings: Settings) -> int:
    """Requeue or end the jobs whose leases expired (how many), and forget failed authentications that have
    left the limiter's window."""
    with database.writing() as session:
        auth_failures.prune(session, settings.auth_failure_window_seconds)
        return (queue.requeue_expired_leases(session, grace_seconds=settings.lease_grace_seconds)
                + gangs.reap_gangs(session, settings))


async def reap_periodically(database: Database, settings: Settings, retention: Retention) -> None:
    while True:
        await asyncio.sleep(settings.reaper_interval_seconds)
        await run_in_threadpool(retention.prune_if_due, database)  # at most once a minute; logs its own failures
        try:
            moved = await run_in_threadpool(reap_once, database, settings)
        except (DatabaseCondition, DBAPIError) as error:  # a database out of service: one line, as /healthz says
            log.warning("reaper: could not requeue expired leases: %s", describe(error))
            continue
        except Exception:  # a locked or briefly unreachable database must not kill the reaper
            log.exception("reaper: could not requeue expired leases")
            continue
        if moved:
            log.info("reaper: %d job(s) with expired leases requeued or ended", moved)


def build_lifespan(settings: Settings, migrate: bool) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
        database = Database.connect(settings)
        if migrate:
            await run_in_threadpool(upgrade_to_head, database.engine)
        app.state.database = database
        integrity = IntegrityWatch(database, settings.integrity_check_interval_seconds)
        app.state.health = HealthMonitor(database, settings.min_free_disk_bytes, integrity, app.state.recent_failures)
        tasks = [reap_periodically(database, settings, Retention(settings.retention_days)),
                 integrity.run_periodically()]
        if settings.health_beats_dir is not None:  # a health process of its own answers the probes
            tasks.append(beat_periodically(settings.health_beats_dir, app.state.recent_failures))
        try:
            async with running(*tasks):
                yield
        finally:
            app.state.health.close()
            database.dispose()

    return lifespan


def lane_limits(settings: Settings) -> LaneLimits:
    return LaneLimits(worker=settings.lane_worker, write=settings.lane_write, read=settings.lane_read,
                      health=settings.lane_health,
                      max_wait_s=settings.lane_max_wait_seconds, max_queue=settings.lane_max_queue)


def create_app(settings: Settings, tokens: TokenStore | None = None, migrate: bool = True) -> FastAPI:
    """The padbench API. `tokens` overrides the tokens file (used by `--dev`, which generates them). With
    `migrate` off, the database must already be at the latest migration (several processes serving one
    port are started after their parent migrated it, so they never race to run the same migration)."""
    app = FastAPI(
        title="padbench",
        version=padbench.__version__,
        description="Queue GPU batching benchmarks and read their results.",
        lifespan=build_lifespan(settings, migrate),
        # Served by install_web from the server's own copies of Swagger UI and ReDoc (no CDN).
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    quiet_access_log(settings.log_polls)
    app.state.tokens = tokens if tokens is not None else load_tokens(settings)
    app.state.recent_failures = RecentFailures(settings.health_failure_window_seconds)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(AdmissionMiddleware, limits=lane_limits(settings))
    # Added last, so it runs first: nothing of an unauthenticated request's body is read.
    limits = FailureLimits(settings.auth_failure_limit, settings.auth_failure_window_seconds,
                           settings.auth_failure_address_limit)
    app.add_middleware(AuthGateMiddleware, tokens=app.state.tokens, limits=limits)
    install_error_handlers(app)
    app.include_router(health.router)
    v1 = APIRouter(prefix=API_PREFIX, responses=error_responses(*EVERY_V1_ROUTE))
    for resource in (jobs, compare, history, baselines, workers, leases, gangs):
        v1.include_router(resource.router)
    app.include_router(v1)
    install_metrics(app)
    install_web(app)
    return app


def create_worker_process_app() -> FastAPI:
    """The app of one of several server processes on one port (`padbench server --workers N`): uvicorn's
    process manager imports this factory in each process it starts. Settings come from PADBENCH_*, which
    the parent set for them; the parent has already migrated the database and checked the tokens file."""
    return create_app(Settings(), migrate=False)
