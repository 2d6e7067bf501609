"""`GET /healthz` and `GET /livez`: no authentication, each in its own admission lane (never behind pollers).

`/healthz` says whether the server can do its work: 200 `{"status": "ok", "database": "ok",
"database_write": "ok", "disk_free_bytes": N, "integrity": "ok", "recent_failures": []}` (`disk_free_bytes`
and `integrity` null on PostgreSQL); 503 with the same fields, Retry-After and a `detail` naming each
problem, so a load balancer or orchestrator stops sending work to a server that could not store it.
Its database probe runs at most once a second, shared by every caller (padbench.server.db.health).

`/livez` proves only that the process answers: it touches nothing, so an orchestrator restarts the server
when it hangs, never because its database is down (a restart would not mend that).

The same routes serve the health process of `padbench server --health-port` (padbench.server.health_process),
whose answers never wait for a busy API process's interpreter lock. There `/livez` also answers 503 when an API
process's event loop has stopped running, and `/healthz` names it among its problems (`app.state.liveness`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, Request, status
from fastapi.responses import JSONResponse

from padbench.server.api.errors import OUTAGE_RETRY_AFTER_SECONDS
from padbench.server.db.health import HealthMonitor

router = APIRouter(tags=["health"])
log = logging.getLogger("padbench.server")


@router.get("/healthz", responses={status.HTTP_503_SERVICE_UNAVAILABLE: {"description": "a check failed"}})
async def healthz(request: Request) -> JSONResponse:
    monitor: HealthMonitor = request.app.state.health
    report = await monitor.report()
    problems = [*report.problems, *liveness_problems(request)]
    body: dict[str, object] = {"status": "unavailable" if problems else "ok", "database": report.database,
                               "database_write": report.database_write, "disk_free_bytes": report.disk_free_bytes,
                               "integrity": report.integrity, "recent_failures": report.recent_failures}
    if not problems:
        return JSONResponse(body)
    body["detail"] = "; ".join(problems)
    log.warning("health check failed: %s", body["detail"])
    return unavailable(body)


@router.get("/livez", responses={status.HTTP_503_SERVICE_UNAVAILABLE: {"description": "an API process hangs"}})
async def livez(request: Request) -> JSONResponse:
    problems = liveness_problems(request)
    if not problems:
        return JSONResponse({"status": "ok"})
    return unavailable({"status": "unavailable", "detail": "; ".join(problems)})


def liveness_problems(request: Request) -> list[str]:
    """The API's processes that stopped answering, as the health process sees them; none in an API process,
    which answers for itself by answering at all."""
    liveness: Callable[[], list[str]] | None = getattr(request.app.state, "liveness", None)
    return [] if liveness is None else liveness()


def unavailable(body: dict[str, object]) -> JSONResponse:
    return JSONResponse(body, status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})
