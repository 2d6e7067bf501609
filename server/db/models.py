"""SQLAlchemy 2 ORM models. The schema itself exists only through the Alembic migrations in `alembic/`;
a test proves the two agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from padbench.contract.api import JobStatus
from padbench.contract.parallel import ALL_GPUS  # noqa: F401  (the jobs.gpus column's `all`)
from padbench.server.db.clock import UtcDateTime

# Stable constraint names, so migrations can refer to them on every dialect.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
STATUS_VALUES = ", ".join(f"'{status.value}'" for status in JobStatus)
# Who holds an attempt: one worker (any one-node job, and a job across nodes claimed whole by a worker that
# hands it to a scheduler, which places the nodes), or a gang of workers, one per node.
HELD_BY_WORKER, HELD_BY_GANG = "worker", "gang"
# A gang member with no attempt yet: it belongs to the job's forming gang.
FORMING_MEMBER = text("attempt_token IS NULL")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Worker(Base):
    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    # The name of the worker token that registered it: only that token may claim jobs as this worker.
    principal: Mapped[str] = mapped_column(String(200))
    capabilities: Mapped[dict[str, Any]] = mapped_column(JSON)
    registered_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # Registration, claims and heartbeats all count: an idle worker polling for work is alive.
    last_contact_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(f"status IN ({STATUS_VALUES})", name="status_known"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
        CheckConstraint("gpus >= 0", name="gpus_not_negative"),
        CheckConstraint("nodes >= 1", name="nodes_positive"),
        # The claim scans queued jobs in id order; the reaper scans running jobs by deadline.
        Index("ix_jobs_status_id", "status", "id"),
        Index("ix_jobs_status_lease_expires_at", "status", "lease_expires_at"),
        Index("ix_jobs_submitter_id", "submitter", "id"),
        # Retention removes finished jobs by age.
        Index("ix_jobs_finished_at", "finished_at"),
        # A retried submit with the same key finds the job the first attempt stored.
        UniqueConstraint("submitter", "idempotency_key", name="uq_jobs_submitter_idempotency_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    name: Mapped[str | None] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    submitter: Mapped[str] = mapped_column(String(200))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    # GPUs the job runs on, matched in the claim against the worker's free ones; ALL_GPUS (0): all of the
    # worker's. The spec holds the same (`gpus`); a column keeps the claim's match plain SQL.
    gpus: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    # Nodes the job runs across (`nodes` in the spec), `gpus` on each: more than one is claimed by a gang of
    # workers, or whole by one worker whose scheduler places that many nodes.
    nodes: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="SET NULL"))
    # The fencing token of the current lease: heartbeats and results must present it.
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    progress: Mapped[float | None] = mapped_column(Float)
    progress_message: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # The client's `Idempotency-Key` for the submit that created the job (unique per submitter).
    idempotency_key: Mapped[str | None] = mapped_column(String(200))


class JobRequirement(Base):
    """One capability a worker must offer to claim the job (`kind:…`, `kernel:…`, `device:…`).

    A separate table keeps the claim's capability filter plain, portable SQL (NOT EXISTS … NOT IN …).
    """

    __tablename__ = "job_requirements"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    capability: Mapped[str] = mapped_column(String(100), primary_key=True)


class JobAttempt(Base):
    """Every lease granted for a job and not given back (a release returns the attempt, and its row with
    it). A result reported under an expired lease is still this job's measurement: the token proves which
    job it belongs to even after the lease went back to the queue.
    """

    __tablename__ = "job_attempts"
    __table_args__ = (
        Index("ix_job_attempts_job_id", "job_id"),
        CheckConstraint(f"held_by IN ('{HELD_BY_WORKER}', '{HELD_BY_GANG}')", name="held_by_known"),
    )

    lease_token: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="SET NULL"))
    claimed_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # HELD_BY_WORKER or HELD_BY_GANG: the gang's paths (members lost, a failure requeued) act only on a gang's.
    held_by: Mapped[str] = mapped_column(String(8), server_default=text(f"'{HELD_BY_WORKER}'"))


class GangMember(Base):
    """One worker's place in the gang that runs a job across several workers (`jobs.nodes` > 1).

    A member joins a queued job, holding its GPUs, and beats its membership while the gang forms; the job
    starts (one attempt, one lease, held by node 0) when `nodes` members hold it. `attempt_token` is that
    lease's token, set on every member as the job starts: a member whose attempt_token is not the job's
    current lease belongs to an attempt that ended. Such a member stays until the job can take no result
    any more: it records who ran that attempt, and its token still reports that attempt's late result.
    Node 0's address and port are the gang's rendezvous.
    """

    __tablename__ = "gang_members"
    __table_args__ = (
        # Node ranks are handed out in join order; two racing joiners get the same rank and one is refused.
        # Only the forming gang's ranks are unique: the members of the job's ended attempts stay (they record
        # who ran each one, whose late result is still taken) while a new gang takes ranks from 0 again.
        Index("uq_gang_members_forming_job_id_node_rank", "job_id", "node_rank", unique=True,
              sqlite_where=FORMING_MEMBER, postgresql_where=FORMING_MEMBER),
        Index("ix_gang_members_worker_id", "worker_id"),
    )

    member_token: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    node_rank: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[int | None] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"))
    address: Mapped[str] = mapped_column(String(255))
    port: Mapped[int] = mapped_column(Integer)
    joined_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    attempt_token: Mapped[str | None] = mapped_column(String(64))


class JobResult(Base):
    """A job's stored result document (the contract's PaddingResult/AttentionResult as JSON)."""

    __tablename__ = "job_results"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # The attempt (lease) that reported it: a retried report of the same result is recognised as such.
    lease_token: Mapped[str | None] = mapped_column(String(64))


class HealthProbe(Base):
    """One row `/healthz` rewrites: proof that the database accepts writes, not only reads."""

    __tablename__ = "health_probe"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    written_at: Mapped[datetime] = mapped_column(UtcDateTime)


class AuthFailure(Base):
    """One failed authentication, kept for the limiter's window: every server process counts the same rows,
    so a guesser spreading attempts over the processes behind one port meets one limit."""

    __tablename__ = "auth_failures"
    __table_args__ = (
        Index("ix_auth_failures_address_failed_at", "address", "failed_at"),
        Index("ix_auth_failures_address_credential_failed_at", "address", "credential", "failed_at"),
        Index("ix_auth_failures_failed_at", "failed_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # An IPv6 address is at most 45 characters; "unknown" when uvicorn saw no peer.
    address: Mapped[str] = mapped_column(String(64))
    # The short hash of what was presented (padbench.server.api.auth_gate.credential_tag), never the token.
    credential: Mapped[str] = mapped_column(String(16))
    failed_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Baseline(Base):
    """A name for one job's result, which later jobs' rows of the same fingerprint are checked against
    (`padbench baseline check`, and automatically as their results are stored)."""

    __tablename__ = "baselines"
    __table_args__ = (Index("ix_baselines_job_id", "job_id"),)

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    # A baseline goes with its job: a pruned job leaves no name pointing at nothing.
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    set_by: Mapped[str] = mapped_column(String(200))  # the principal that set it: only it or an admin moves it
    set_at: Mapped[datetime] = mapped_column(UtcDateTime)


class JobRegression(Base):
    """What the automatic check against a baseline found as the job's result was stored: one row per baseline
    that some row of the job's result matched by fingerprint."""

    __tablename__ = "job_regressions"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    # Not a foreign key: the finding stays as it was when the baseline is later moved to another job.
    baseline: Mapped[str] = mapped_column(String(100), primary_key=True)
    baseline_job_id: Mapped[int] = mapped_column(Integer)
    regressed: Mapped[bool] = mapped_column(Boolean)
    summary: Mapped[str] = mapped_column(Text)
    checked_at: Mapped[datetime] = mapped_column(UtcDateTime)
