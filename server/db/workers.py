"""Worker registration and last contact (workers are not jobs: their rows change outside
`padbench.server.queue`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from padbench.server.db.clock import db_now
from padbench.server.db.models import Job, Worker
from padbench.server.db.reads import find_worker_by_name


class WorkerNameTaken(Exception):
    """The name belongs to a worker registered with another token."""


def register_worker(
    session: Session, *, name: str, principal: str, capabilities: dict[str, Any]
) -> tuple[Worker, bool]:
    """Register a worker, or refresh the capabilities of the caller's own worker of that name.

    Returns the worker and whether it is new. Re-registering is how a restarted worker keeps its id.
    """
    existing = find_worker_by_name(session, name)
    if existing is None:
        worker = session.scalars(
            insert(Worker)
            .values(name=name, principal=principal, capabilities=capabilities, registered_at=db_now(),
                    last_contact_at=db_now())
            .returning(Worker)
        ).one()
        return worker, True
    if existing.principal != principal:
        raise WorkerNameTaken(name)
    worker = session.scalars(
        update(Worker).where(Worker.id == existing.id)
        .values(capabilities=capabilities, registered_at=db_now(), last_contact_at=db_now())
        .returning(Worker).execution_options(synchronize_session=False, populate_existing=True)
    ).one()
    return worker, False


def record_contact(session: Session, worker_id: int) -> None:
    """The worker spoke to the server just now (a claim, found work or not): it is alive even when idle."""
    session.execute(
        update(Worker).where(Worker.id == worker_id).values(last_contact_at=db_now())
        .execution_options(synchronize_session=False)
    )


def record_lease_holder_contact(session: Session, job_id: int, lease_token: str) -> None:
    """As `record_contact`, for the worker holding `lease_token` on job `job_id` (a heartbeat names no worker)."""
    holder = select(Job.worker_id).where(Job.id == job_id, Job.lease_token == lease_token).scalar_subquery()
    session.execute(
        update(Worker).where(Worker.id == holder).values(last_contact_at=db_now())
        .execution_options(synchronize_session=False)
    )
