"""baselines: names for jobs whose results later jobs are checked against for regressions

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "baselines",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("set_by", sa.String(length=200), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_baselines_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_baselines")),
    )
    op.create_index("ix_baselines_job_id", "baselines", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_baselines_job_id", table_name="baselines")
    op.drop_table("baselines")
