"""who holds each attempt: job_attempts.held_by, one worker (`worker`) or a gang of workers (`gang`)

A job across several nodes is held either by a gang (one worker per node) or whole by one worker that hands
it to a scheduler; only a gang's attempt has members to lose.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job_attempts") as batch:
        batch.add_column(sa.Column("held_by", sa.String(length=8), server_default=sa.text("'worker'"),
                                   nullable=False))
        batch.create_check_constraint(op.f("ck_job_attempts_held_by_known"), "held_by IN ('worker', 'gang')")
    # Before this revision a job across several nodes was claimed only by a gang.
    op.execute("UPDATE job_attempts SET held_by = 'gang' "
               "WHERE job_id IN (SELECT id FROM jobs WHERE nodes > 1)")


def downgrade() -> None:
    with op.batch_alter_table("job_attempts") as batch:
        batch.drop_constraint(op.f("ck_job_attempts_held_by_known"), type_="check")
        batch.drop_column("held_by")
