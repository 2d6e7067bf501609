"""`GET /healthz`: no authentication; says whether the database answers."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from sqlalchemy import text

from padbench.server.api.deps import ReadSessionDep
from padbench.server.api.transactions import UnitOfWorkRoute

router = APIRouter(tags=["health"], route_class=UnitOfWorkRoute)


@router.get("/healthz")
def healthz(session: ReadSessionDep) -> dict[str, str]:
    try:
        session.execute(text("SELECT 1"))
    except Exception as error:  # any database failure means "not healthy", with the reason
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"database: {type(error).__name__}") from error
    return {"status": "ok", "database": "ok"}
