"""`GET /healthz` and `GET /livez`: no authentication, each in its own admission lane (never behind pollers).

`/healthz` says whether the server can do its work: 200 `{"status": "ok", "database": "ok",
"database_write": "ok", "disk_free_bytes": N, "integrity": "ok", "recent_failures": []}` (`disk_free_bytes`
and `integrity` null on PostgreSQL); 503 with the same fields, Retry-After and a `detail` naming each
problem, so a load balancer or orchestrator stops sending work to a server that could not store it.
Its database probe runs at most once a second, shared by every caller (padbench.server.db.health).

`/livez` proves only that the process answers: it touches nothing, so an orchestrator restarts the server
when it hangs, never because its database is down (a restart would not mend that).
"""

from __future__ import annotations

import logging

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
    body: dict[str, object] = {"status": "unavailable" if report.problems else "ok", "database": report.database,
                               "database_write": report.database_write, "disk_free_bytes": report.disk_free_bytes,
                               "integrity": report.integrity, "recent_failures": report.recent_failures}
    if not report.problems:
        return JSONResponse(body)
    body["detail"] = "; ".join(report.problems)
    log.warning("health check failed: %s", body["detail"])
    return JSONResponse(body, status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})


@router.get("/livez")
async def livez() -> dict[str, str]:
    return {"status": "ok"}
