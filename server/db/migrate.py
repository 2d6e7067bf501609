"""Apply the Alembic migrations (the only way the schema is created or changed).

The migrations live in the repository's `alembic/` folder and install as the package data
`padbench.migrations`, so they are found through `importlib.resources` in an installed package and in a
development checkout alike; no `alembic.ini` is needed at run time.
"""

from __future__ import annotations

from importlib.resources import as_file, files

from alembic.config import Config
from sqlalchemy import Engine

from alembic import command

MIGRATIONS_PACKAGE = "padbench.migrations"


def upgrade_to_head(engine: Engine) -> None:
    """Run every pending migration on `engine` in one transaction (both dialects have transactional DDL)."""
    # The migrations are a namespace package (an `__init__.py` in `alembic/` would shadow the Alembic
    # library), and `as_file` of a namespace package's directory needs Python 3.12: resolve a file in it.
    with as_file(files(MIGRATIONS_PACKAGE).joinpath("env.py")) as env_script:
        config = Config()
        config.set_main_option("script_location", str(env_script.parent))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
