"""jobs across several workers: jobs.nodes, and gang_members, the workers that hold such a job together

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every job queued before this ran on one worker: the server default fills their rows.
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("nodes", sa.Integer(), server_default=sa.text("1"), nullable=False))
        batch.create_check_constraint(op.f("ck_jobs_nodes_positive"), "nodes >= 1")
    op.create_table(
        "gang_members",
        sa.Column("member_token", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("node_rank", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("address", sa.String(length=255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempt_token", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_gang_members_job_id_jobs"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["worker_id"], ["workers.id"], name=op.f("fk_gang_members_worker_id_workers"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("member_token", name=op.f("pk_gang_members")),
        sa.UniqueConstraint("job_id", "node_rank", name="uq_gang_members_job_id_node_rank"),
    )
    op.create_index("ix_gang_members_worker_id", "gang_members", ["worker_id"])


def downgrade() -> None:
    op.drop_index("ix_gang_members_worker_id", table_name="gang_members")
    op.drop_table("gang_members")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_nodes_positive"), type_="check")
        batch.drop_column("nodes")
