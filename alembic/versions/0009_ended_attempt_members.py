"""members of ended gang attempts stay: node ranks are unique only within a forming gang

A gang's attempt that ended (requeued, or failed by the reaper) keeps its members until the job can take no
result any more, so the member whose node ran global rank 0 can still report that attempt's late result.
A new gang for the same job then takes node ranks from 0 again: the unique (job_id, node_rank) constraint
becomes a partial unique index over the forming gang's members (no attempt yet).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FORMING_MEMBER = sa.text("attempt_token IS NULL")


def upgrade() -> None:
    with op.batch_alter_table("gang_members") as batch:
        batch.drop_constraint("uq_gang_members_job_id_node_rank", type_="unique")
    op.create_index("uq_gang_members_forming_job_id_node_rank", "gang_members", ["job_id", "node_rank"],
                    unique=True, sqlite_where=FORMING_MEMBER, postgresql_where=FORMING_MEMBER)


def downgrade() -> None:
    op.drop_index("uq_gang_members_forming_job_id_node_rank", table_name="gang_members")
    # Before this revision only live members were kept (the forming gang of a queued job, the members of the
    # running attempt); ended attempts' members may share node ranks with the next gang's.
    op.execute("DELETE FROM gang_members WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = gang_members.job_id "
               "AND ((gang_members.attempt_token IS NULL AND jobs.status = 'queued') "
               "OR (gang_members.attempt_token = jobs.lease_token AND jobs.status = 'running')))")
    with op.batch_alter_table("gang_members") as batch:
        batch.create_unique_constraint("uq_gang_members_job_id_node_rank", ["job_id", "node_rank"])
