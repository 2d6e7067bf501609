"""Baselines: a name per job result that later jobs are checked against (baselines are not jobs: their rows
change outside `padbench.server.queue`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from padbench.server.db.clock import db_now
from padbench.server.db.models import Baseline


def set_baseline(session: Session, *, name: str, job_id: int, set_by: str) -> Baseline:
    """Point `name` at `job_id`, creating it or moving it, in one statement (two callers setting the same new
    name at once both succeed, the later one winning, rather than one failing on the primary key)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    values = {"name": name, "job_id": job_id, "set_by": set_by, "set_at": db_now()}
    statement = dialect.insert(Baseline).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=[Baseline.name],
        set_={"job_id": statement.excluded.job_id, "set_by": statement.excluded.set_by,
              "set_at": statement.excluded.set_at})
    return session.scalars(statement.returning(Baseline).execution_options(populate_existing=True)).one()


def find_baseline(session: Session, name: str) -> Baseline | None:
    return session.scalar(select(Baseline).where(Baseline.name == name).execution_options(populate_existing=True))


def list_baselines(session: Session) -> list[Baseline]:
    return list(session.scalars(select(Baseline).order_by(Baseline.name)))
