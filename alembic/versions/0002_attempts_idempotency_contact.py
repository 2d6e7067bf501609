"""every lease ever granted (job_attempts) and which one a result came from, submit idempotency keys,
workers' last contact, and a one-row table /healthz writes to

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def timestamp(name: str, nullable: bool) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "job_attempts",
        sa.Column("lease_token", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        timestamp("claimed_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_attempts_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"], ["workers.id"], name=op.f("fk_job_attempts_worker_id_workers"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("lease_token", name=op.f("pk_job_attempts")),
    )
    op.create_index("ix_job_attempts_job_id", "job_attempts", ["job_id"])
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(length=200), nullable=True))
        batch.create_unique_constraint("uq_jobs_submitter_idempotency_key", ["submitter", "idempotency_key"])
    op.create_index("ix_jobs_finished_at", "jobs", ["finished_at"])
    with op.batch_alter_table("job_results") as batch:
        batch.add_column(sa.Column("lease_token", sa.String(length=64), nullable=True))
    op.create_table(
        "health_probe",
        sa.Column("id", sa.Integer(), nullable=False),
        timestamp("written_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_health_probe")),
    )
    with op.batch_alter_table("workers") as batch:
        batch.add_column(timestamp("last_contact_at", nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("last_contact_at")
    op.drop_table("health_probe")
    with op.batch_alter_table("job_results") as batch:
        batch.drop_column("lease_token")
    op.drop_index("ix_jobs_finished_at", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint("uq_jobs_submitter_idempotency_key", type_="unique")
        batch.drop_column("idempotency_key")
    op.drop_index("ix_job_attempts_job_id", table_name="job_attempts")
    op.drop_table("job_attempts")
