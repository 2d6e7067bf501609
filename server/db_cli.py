"""`padbench db upgrade|backup|restore`: the database's migrations, and backups of what the team measured,
taken while the server runs (SQLite's online backup API; `pg_dump` for PostgreSQL)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from padbench.server.cli import load_settings
from padbench.server.core.config import Settings

if TYPE_CHECKING:
    from sqlalchemy.engine import URL


def upgrade_database(args: argparse.Namespace) -> int:
    from padbench.server.db.engine import Database
    from padbench.server.db.migrate import upgrade_to_head

    settings = load_settings()
    if settings is None:
        return 2
    database = Database.connect(settings)
    try:
        upgrade_to_head(database.engine)
    finally:
        database.dispose()
    print(f"padbench db: {database.engine.url.render_as_string(hide_password=True)} is at the latest migration")
    return 0


def run_db_action(action: str, act: Callable[[Settings, URL, Path | None], str]) -> int:
    """Run `act(settings, url, sqlite_file)` (sqlite_file None on PostgreSQL) and print what it did, or its
    refusal in one line."""
    from padbench.server.db import backup

    settings = load_settings()
    if settings is None:
        return 2
    url = backup.database_url(settings.database_url)
    try:
        done = act(settings, url, backup.sqlite_path(url))
    except backup.BackupError as error:
        print(f"padbench db {action}: {error}", file=sys.stderr)
        return 1
    print(f"padbench db: {done}")
    return 0


def backup_database(args: argparse.Namespace) -> int:
    from padbench.server.db import backup

    def act(_settings: Settings, url: URL, source: Path | None) -> str:
        if source is None:
            written = backup.backup_postgresql(url, args.path)
            return f"backed up {url.render_as_string(hide_password=True)} to {written} (pg_dump, custom format)"
        copied = backup.backup_sqlite(source, args.path)
        return (f"backed up {source} to {copied.path} ({copied.jobs} jobs, {copied.results} results, "
                f"{copied.size_bytes} bytes)")

    return run_db_action("backup", act)


def restore_database(args: argparse.Namespace) -> int:
    from padbench.server.db import backup

    def act(settings: Settings, url: URL, target: Path | None) -> str:
        if target is None:
            refuse_to_restore_over_jobs(settings, args.replace)
            backup.restore_postgresql(url, args.path)
            return f"restored {args.path} into {url.render_as_string(hide_password=True)}"
        copied = backup.restore_sqlite(args.path, target, args.replace)
        return f"restored {args.path} into {target} ({copied.jobs} jobs, {copied.results} results); start the server"

    return run_db_action("restore", act)


def refuse_to_restore_over_jobs(settings: Settings, replace: bool) -> None:
    from sqlalchemy import func, select
    from sqlalchemy.exc import DBAPIError

    from padbench.server.db.backup import BackupError
    from padbench.server.db.engine import Database
    from padbench.server.db.models import Job

    if replace:
        return
    database = Database.connect(settings)
    try:
        with database.read() as session:
            jobs = session.scalar(select(func.count()).select_from(Job))
    except DBAPIError:
        jobs = None  # no schema yet: nothing to lose
    finally:
        database.dispose()
    if jobs:
        raise BackupError(f"the database holds {jobs} jobs: restoring would replace them; stop the server, and "
                          "pass --replace to restore over them")


def register(subparsers: argparse._SubParsersAction) -> None:
    database = subparsers.add_parser("db", help="database maintenance")
    actions = database.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = actions.add_parser("upgrade", help="apply pending migrations (the server also does this on start)")
    upgrade.set_defaults(handler=upgrade_database)
    backup = actions.add_parser("backup", help="copy the database to PATH, safely while the server runs "
                                "(SQLite's online backup; pg_dump for PostgreSQL)")
    backup.add_argument("path", type=Path, help="the backup file to write (replaced atomically if it exists)")
    backup.set_defaults(handler=backup_database)
    restore = actions.add_parser("restore", help="copy a backup made by `padbench db backup` into the database "
                                 "(stop the server first)")
    restore.add_argument("path", type=Path, help="the backup file to restore")
    restore.add_argument("--replace", action="store_true", help="restore over a database that already holds jobs")
    restore.set_defaults(handler=restore_database)
