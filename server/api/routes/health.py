"""`GET /healthz`: no authentication; says whether the database answers, accepts a write, and has room.

200 `{"status": "ok", "database": "ok", "database_write": "ok", "disk_free_bytes": N}` (null on
PostgreSQL); 503 with the same fields and a `detail` naming each problem, so a load balancer or
orchestrator stops sending work to a server that could not store it.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, status
from fastapi.responses import JSONResponse

from padbench.server.api.deps import DatabaseDep, SettingsDep
from padbench.server.api.errors import OUTAGE_RETRY_AFTER_SECONDS
from padbench.server.db.health import check_health

router = APIRouter(tags=["health"])
log = logging.getLogger("padbench.server")


@router.get("/healthz", responses={status.HTTP_503_SERVICE_UNAVAILABLE: {"description": "a check failed"}})
def healthz(database: DatabaseDep, settings: SettingsDep) -> JSONResponse:
    report = check_health(database, settings.min_free_disk_bytes)
    body: dict[str, object] = {"status": "unavailable" if report.problems else "ok", "database": report.database,
                               "database_write": report.database_write, "disk_free_bytes": report.disk_free_bytes}
    if not report.problems:
        return JSONResponse(body)
    body["detail"] = "; ".join(report.problems)
    log.warning("health check failed: %s", body["detail"])
    return JSONResponse(body, status.HTTP_503_SERVICE_UNAVAILABLE,
                        headers={"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})
