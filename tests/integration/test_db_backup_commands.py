"""`padbench db backup` / `restore` refusals and PostgreSQL's round trip through pg_dump and pg_restore.
(The SQLite round trip under submits, with real processes, is tests/acceptance/test_database_backup.py.)"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

from padbench.cli import main
from tests.integration.conftest import POSTGRES_ADMIN_URL, LiveServer, empty_postgres, serve
from tests.integration.test_server_database_outage import with_jobs


def read_jobs(server: LiveServer, job_ids: range) -> dict[int, bytes]:
    with server.client("admin") as admin:
        return {job_id: admin.get(f"/v1/jobs/{job_id}").content for job_id in job_ids}


def test_restore_refuses_to_replace_a_database_holding_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path) as server:
        with_jobs(server)
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{database_file}")
    assert main(["db", "backup", str(tmp_path / "backup.sqlite3")]) == 0
    assert "30 jobs, 0 results" in capsys.readouterr().out
    assert main(["db", "restore", str(tmp_path / "backup.sqlite3")]) == 1
    refusal = capsys.readouterr().err
    assert "holds 30 jobs" in refusal and "--replace" in refusal
    assert main(["db", "restore", "--replace", str(tmp_path / "backup.sqlite3")]) == 0


def test_a_file_that_is_not_a_padbench_backup_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    (tmp_path / "notes.txt").write_text("not a database " * 100, encoding="utf-8")
    assert main(["db", "restore", str(tmp_path / "notes.txt")]) == 1
    assert "not a padbench database" in capsys.readouterr().err
    assert main(["db", "restore", str(tmp_path / "missing.sqlite3")]) == 1
    assert "no such database file" in capsys.readouterr().err
    assert not (tmp_path / "fresh.sqlite3").exists()


def test_postgresql_without_pg_dump_is_refused_with_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PADBENCH_DATABASE_URL", "postgresql://padbench@127.0.0.1:5432/padbench")
    monkeypatch.setenv("PATH", str(tmp_path))  # no PostgreSQL client tools here
    assert main(["db", "backup", str(tmp_path / "padbench.dump")]) == 1
    assert "pg_dump is not installed" in capsys.readouterr().err


@pytest.mark.postgres
@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="PostgreSQL's client tools are not installed")
def test_a_postgresql_backup_restores_into_a_fresh_database(tmp_path: Path, postgres_database: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fresh_name = f"padbench_restored_{secrets.token_hex(4)}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{fresh_name}"'))
    fresh_url = make_url(postgres_database).set(database=fresh_name).render_as_string(hide_password=False)
    try:
        empty_postgres(postgres_database)
        with serve(postgres_database, tmp_path) as live:
            with_jobs(live)
            before = read_jobs(live, range(1, 31))
            monkeypatch.setenv("PADBENCH_DATABASE_URL", postgres_database)
            assert main(["db", "backup", str(tmp_path / "padbench.dump")]) == 0
        monkeypatch.setenv("PADBENCH_DATABASE_URL", fresh_url)
        assert main(["db", "restore", str(tmp_path / "padbench.dump")]) == 0
        with serve(fresh_url, tmp_path) as restored:
            assert read_jobs(restored, range(1, 31)) == before
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{fresh_name}" WITH (FORCE)'))
        admin.dispose()
