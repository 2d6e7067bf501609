"""how many GPUs each job runs on (jobs.gpus; 0 means all of the worker's), which the claim matches against
a worker's free GPUs

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every job queued before this ran on one GPU: the server default fills their rows.
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("gpus", sa.Integer(), server_default=sa.text("1"), nullable=False))
        batch.create_check_constraint(op.f("ck_jobs_gpus_not_negative"), "gpus >= 0")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_gpus_not_negative"), type_="check")
        batch.drop_column("gpus")
