"""`padbench db backup PATH` and `padbench db restore PATH`: what the team measured, kept safe.

SQLite: SQLite's online backup API (`sqlite3.Connection.backup`, https://www.sqlite.org/backup.html) copies
the database page by page inside one read transaction, so the copy is one consistent moment of the
database even while the server writes to it (in WAL mode a reader never blocks the writer). The copy is
written beside PATH, read through by `PRAGMA quick_check`, and only then renamed onto PATH: a backup
interrupted halfway never replaces a good one. A restore copies a checked backup into the database file
the same way, through SQLite's locks.

PostgreSQL: `pg_dump --format=custom` and `pg_restore --clean`, the PostgreSQL client tools, which must be
installed (and of the server's major version or newer); without them the command refuses and says so.
The password travels in PGPASSWORD, never on a command line that `ps` shows.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from padbench.server.db.engine import normalize_database_url

SIDE_FILES = ("-wal", "-shm")


class BackupError(Exception):
    """A backup or restore that cannot be done; the message says why and what to do."""


@dataclass(frozen=True)
class Copied:
    path: Path
    jobs: int
    results: int
    size_bytes: int


def database_url(url: str) -> URL:
    return make_url(normalize_database_url(url))


def sqlite_path(url: URL) -> Path | None:
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:") \
        else None


def open_existing(path: Path) -> sqlite3.Connection:
    """A connection to the SQLite file at `path`, refusing to create one (`mode=rw`)."""
    if not path.is_file():
        raise BackupError(f"{path}: no such database file")
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True)


def checked_contents(connection: sqlite3.Connection, path: Path) -> tuple[int, int]:
    """The (jobs, results) a padbench SQLite database holds, after SQLite's quick_check found it whole."""
    try:
        verdict = [row[0] for row in connection.execute("PRAGMA quick_check(1)")]
        if verdict != ["ok"]:
            raise BackupError(f"{path}: fails PRAGMA quick_check ({' '.join(verdict)})")
        jobs = connection.execute("SELECT count(*) FROM jobs").fetchone()[0]
        results = connection.execute("SELECT count(*) FROM job_results").fetchone()[0]
    except sqlite3.DatabaseError as error:
        raise BackupError(f"{path}: not a padbench database ({error})") from None
    return int(jobs), int(results)


def backup_sqlite(source: Path, target: Path) -> Copied:
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.unlink(missing_ok=True)
        with closing(open_existing(source)) as live, closing(sqlite3.connect(partial)) as copy:
            live.backup(copy)  # all pages in one step: one read transaction, one consistent moment
            jobs, results = checked_contents(copy, partial)
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        partial.replace(target)
    except (sqlite3.Error, OSError) as error:
        partial.unlink(missing_ok=True)
        raise BackupError(f"cannot back up {source} to {target}: {error}") from None
    return Copied(target, jobs, results, target.stat().st_size)


def restore_sqlite(backup: Path, target: Path, replace: bool) -> Copied:
    try:
        return copy_backup_into(backup, target, replace)
    except (sqlite3.Error, OSError) as error:
        raise BackupError(f"cannot restore {backup} into {target}: {error}") from None


def copy_backup_into(backup: Path, target: Path, replace: bool) -> Copied:
    with closing(open_existing(backup)) as saved:
        jobs, results = checked_contents(saved, backup)
        if target.exists():
            refuse_to_overwrite(target, replace)
        else:
            for suffix in SIDE_FILES:  # a deleted database's journal must not be replayed into the restored one
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            target.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(target)) as restored:
            saved.backup(restored)
    return Copied(target, jobs, results, target.stat().st_size)


def refuse_to_overwrite(target: Path, replace: bool) -> None:
    if replace:
        return
    with closing(open_existing(target)) as current:
        try:
            jobs = current.execute("SELECT count(*) FROM jobs").fetchone()[0]
        except sqlite3.DatabaseError:
            jobs = None  # damaged or empty: nothing a restore could lose
    if jobs:
        raise BackupError(f"{target} holds {jobs} jobs: restoring would replace them; stop the server, and pass "
                          "--replace to restore over them")


def pg_tool(name: str) -> str:
    tool = shutil.which(name)
    if tool is None:
        raise BackupError(f"{name} is not installed: install PostgreSQL's client tools (e.g. `apt install "
                          "postgresql-client`) of the server's major version, or use your PostgreSQL's own backups")
    return tool


def libpq(url: URL) -> tuple[str, dict[str, str]]:
    """The URL as libpq reads it (no driver name, no password) and the environment carrying the password."""
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    return url.set(drivername="postgresql", password=None).render_as_string(hide_password=False), env


def run_pg_tool(arguments: list[str], env: dict[str, str]) -> None:
    finished = subprocess.run(arguments, env=env, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        last = (finished.stderr.strip().splitlines() or [f"exit status {finished.returncode}"])[-1]
        raise BackupError(f"{Path(arguments[0]).name} failed: {last}")


def backup_postgresql(url: URL, target: Path) -> Path:
    dsn, env = libpq(url)
    partial = target.with_name(f".{target.name}.partial")
    run_pg_tool([pg_tool("pg_dump"), "--format=custom", "--file", str(partial), "--dbname", dsn], env)
    partial.replace(target)
    return target


def restore_postgresql(url: URL, backup: Path) -> None:
    if not backup.is_file():
        raise BackupError(f"{backup}: no such backup file")
    dsn, env = libpq(url)
    run_pg_tool([pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--single-transaction",
                 "--dbname", dsn, str(backup)], env)
