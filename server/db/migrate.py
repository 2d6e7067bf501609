"""Apply the Alembic migrations in `alembic/` (the only way the schema is created or changed)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from sqlalchemy import Engine

from alembic import command

REPO_ROOT = Path(__file__).resolve().parents[2]
ALEMBIC_INI = REPO_ROOT / "alembic.ini"
MIGRATIONS_DIR = REPO_ROOT / "alembic"


def alembic_config() -> Config:
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade_to_head(engine: Engine) -> None:
    """Run every pending migration on `engine` in one transaction (both dialects have transactional DDL)."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
