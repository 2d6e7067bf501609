"""failed authentications (auth_failures), counted by every server process behind one port

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "auth_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("credential", sa.String(length=16), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_failures")),
    )
    op.create_index("ix_auth_failures_address_failed_at", "auth_failures", ["address", "failed_at"])
    op.create_index(
        "ix_auth_failures_address_credential_failed_at", "auth_failures", ["address", "credential", "failed_at"]
    )
    op.create_index("ix_auth_failures_failed_at", "auth_failures", ["failed_at"])


def downgrade() -> None:
    op.drop_index("ix_auth_failures_failed_at", table_name="auth_failures")
    op.drop_index("ix_auth_failures_address_credential_failed_at", table_name="auth_failures")
    op.drop_index("ix_auth_failures_address_failed_at", table_name="auth_failures")
    op.drop_table("auth_failures")
