"""The schema exists only through Alembic migrations, and they match the ORM models exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from padbench.server.db.engine import Database
from padbench.server.db.models import Base


def test_migrations_match_the_models(queue_db: Database) -> None:
    with queue_db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_migrations_create_every_table(queue_db: Database) -> None:
    tables = set(inspect(queue_db.engine).get_table_names())
    assert tables == {"alembic_version", *Base.metadata.tables}


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(queue_db: Database) -> None:
    if queue_db.is_postgresql:
        return
    with queue_db.engine.connect() as connection:
        pragma = connection.exec_driver_sql
        assert pragma("PRAGMA journal_mode").scalar() == "wal"
        assert pragma("PRAGMA foreign_keys").scalar() == 1
        assert pragma("PRAGMA busy_timeout").scalar() == 10_000
