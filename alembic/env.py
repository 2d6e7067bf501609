"""Alembic environment: the URL comes from the server's Settings, the target schema from the ORM models."""

from __future__ import annotations

from logging.config import fileConfig

from sqlalchemy import Connection

from alembic import context
from padbench.server.core.config import Settings
from padbench.server.db.engine import create_db_engine
from padbench.server.db.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given: Connection | None = config.attributes.get("connection")
    if given is not None:  # `padbench server` / `padbench db upgrade` pass their own connection
        run_migrations(given)
        return
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    engine = create_db_engine(Settings())
    try:
        with engine.connect() as connection:
            run_migrations(connection)
            connection.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: run `padbench db upgrade` against a database")
run_online()
