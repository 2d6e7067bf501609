"""`padbench server` started on a database it must not serve (a damaged SQLite file, a PostgreSQL server
that does not answer) exits non-zero with one line saying what is wrong and what to do: no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import serve, write_tokens_file
from tests.integration.test_server_database_outage import checkpointed, overwrite_header, overwrite_pages, with_jobs

PADBENCH = [sys.executable, "-m", "padbench.cli"]


def start_server(tmp_path: Path, database_url: str) -> subprocess.CompletedProcess[str]:
    tokens_file = tmp_path / "start-tokens"
    write_tokens_file(tokens_file)
    env = os.environ | {"PADBENCH_DATABASE_URL": database_url, "PADBENCH_TOKENS_FILE": str(tokens_file)}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return subprocess.run([*PADBENCH, "server", "--port", str(port)], env=env, capture_output=True, text=True,
                          timeout=60)


def a_used_database(tmp_path: Path) -> Path:
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path) as server:
        with_jobs(server)
    checkpointed(database_file)
    return database_file


def assert_one_line_refusal(started: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert started.returncode == 1, started.stderr
    assert "Traceback" not in started.stderr and started.stdout == ""
    [line] = started.stderr.splitlines()
    assert line.startswith("padbench server: cannot start: ")
    for text in expected:
        assert text in line, line


@pytest.mark.parametrize(("damage", "reason"), [
    (overwrite_header, "the database file is not a SQLite database"),
    (overwrite_pages, "the database file "),  # SQLite names the damage: a failed quick_check, or corruption
])
def test_a_damaged_sqlite_file_is_refused_in_one_line(tmp_path: Path, damage: Callable[[Path], None],
                                                      reason: str) -> None:
    database_file = a_used_database(tmp_path)
    damage(database_file)
    started = start_server(tmp_path, f"sqlite:///{database_file}")
    assert_one_line_refusal(started, str(database_file), reason, "padbench db restore", "move the file aside")


def test_an_unreachable_postgresql_server_is_refused_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = start_server(tmp_path, f"postgresql://padbench@127.0.0.1:{port}/padbench")
    assert_one_line_refusal(started, "the database cannot be reached", f"127.0.0.1:{port}")
