"""Baselines: a name per job result that later jobs are checked against (baselines are not jobs: their rows
change outside `padbench.server.queue`)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from padbench.contract.history import RegressionCheck, RegressionFlag
from padbench.server.db.clock import db_now
from padbench.server.db.models import Baseline, Job, JobRegression, JobResult


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


def matching_kind_baselines(session: Session, kind: str) -> list[tuple[Baseline, dict[str, Any]]]:
    """Every baseline whose job is of `kind`, with its stored result document."""
    rows = session.execute(
        select(Baseline, JobResult.result).join(Job, Job.id == Baseline.job_id)
        .join(JobResult, JobResult.job_id == Baseline.job_id).where(Job.kind == kind).order_by(Baseline.name))
    return [(baseline, document) for baseline, document in rows]


def record_regression_checks(session: Session, job_id: int, checks: list[RegressionCheck]) -> None:
    """What the automatic check of the job's new result against each matching baseline found."""
    for check in checks:  # one statement each: the database's clock is an expression, not a bound value
        session.execute(insert(JobRegression).values(
            job_id=job_id, baseline=check.baseline, baseline_job_id=check.baseline_job_id,
            regressed=check.regressed, summary=check.summary, checked_at=db_now()))


def regression_flags(session: Session, job_id: int) -> list[RegressionFlag]:
    rows = session.scalars(select(JobRegression).where(JobRegression.job_id == job_id).order_by(JobRegression.baseline))
    return [RegressionFlag(baseline=row.baseline, baseline_job_id=row.baseline_job_id, regressed=row.regressed,
                           summary=row.summary) for row in rows]


def baseline_names_by_job(session: Session) -> dict[int, list[str]]:
    """The baseline names set on each job that has any, by name."""
    names: dict[int, list[str]] = {}
    for baseline in list_baselines(session):
        names.setdefault(baseline.job_id, []).append(baseline.name)
    return names


def regression_flags_of(session: Session, job_ids: Collection[int]) -> dict[int, list[RegressionFlag]]:
    """The automatic checks' flags of each of `job_ids` that has any, in one query."""
    flags: dict[int, list[RegressionFlag]] = {}
    rows = session.scalars(select(JobRegression).where(JobRegression.job_id.in_(list(job_ids)))
                           .order_by(JobRegression.job_id, JobRegression.baseline))
    for row in rows:
        flags.setdefault(row.job_id, []).append(RegressionFlag(
            baseline=row.baseline, baseline_job_id=row.baseline_job_id, regressed=row.regressed, summary=row.summary))
    return flags
