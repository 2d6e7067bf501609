"""job_regressions: what the automatic check of a new result against its matching baselines found

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_regressions",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("baseline", sa.String(length=100), nullable=False),
        sa.Column("baseline_job_id", sa.Integer(), nullable=False),
        sa.Column("regressed", sa.Boolean(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_regressions_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "baseline", name=op.f("pk_job_regressions")),
    )


def downgrade() -> None:
    op.drop_table("job_regressions")
