"""Workers: register (name and capabilities); admins and viewers list them, with each one's last contact, the
jobs it runs now and how many of its GPUs they hold."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response, status

from padbench.contract.api import WorkerOut, WorkerRegister
from padbench.server.api.deps import ReadSessionDep, SessionDep, ViewerAuth, WorkerAuth
from padbench.server.api.responses import error_responses
from padbench.server.api.transactions import UnitOfWorkRoute
from padbench.server.api.views import worker_out
from padbench.server.db import reads
from padbench.server.db.workers import WorkerNameTaken, register_worker

router = APIRouter(prefix="/workers", tags=["workers"], route_class=UnitOfWorkRoute)


REREGISTERED = {"model": WorkerOut,
                "description": "The caller re-registered its own worker: same id, fresh capabilities"}


@router.post("", status_code=status.HTTP_201_CREATED, responses={200: REREGISTERED, **error_responses(409)})
def register(body: WorkerRegister, response: Response, session: SessionDep, principal: WorkerAuth) -> WorkerOut:
    """201 for a new worker; 200 when the caller re-registers its own worker (same id, fresh capabilities)."""
    try:
        worker, created = register_worker(
            session, name=body.name, principal=principal.name, capabilities=body.capabilities.model_dump(mode="json")
        )
    except WorkerNameTaken:
        raise HTTPException(
            status.HTTP_409_CONFLICT, f"name: worker {body.name!r} is registered with another token"
        ) from None
    if not created:
        response.status_code = status.HTTP_200_OK
    return worker_out(worker)


@router.get("")
def list_workers(session: ReadSessionDep, principal: ViewerAuth) -> list[WorkerOut]:
    """Every registered worker: its capabilities (its GPUs among them), last contact (registration, claim or
    heartbeat), the jobs it runs now and how many of its GPUs they hold."""
    return [worker_out(row.worker, row.running) for row in reads.list_workers(session)]
