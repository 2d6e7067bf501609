"""How many server processes `padbench server` starts: --workers (PADBENCH_SERVER_PROCESSES), else the cores the host
can spare (one left to the rest of the host, at most four), one with --dev; --dev with several is refused."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from padbench.server import cli
from padbench.server.core.config import Settings


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (3, 2), (5, 4), (128, 4)])
def test_the_default_leaves_a_core_to_the_host_and_is_capped(
    monkeypatch: pytest.MonkeyPatch, cores: int, expected: int
) -> None:
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda _pid: set(range(cores)))
    assert cli.default_server_processes() == expected


def test_workers_is_taken_as_given_and_dev_or_sqlite_defaults_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "default_server_processes", lambda: 3)
    postgresql = "postgresql://postgres@127.0.0.1:5432/test"
    assert cli.server_processes(Settings(server_processes=2)) == 2
    assert cli.server_processes(Settings(database_url=postgresql)) == 3
    assert cli.server_processes(Settings(database_url=postgresql, dev=True)) == 1
    assert cli.server_processes(Settings(database_url="sqlite:///padbench.sqlite3")) == 1
    assert cli.server_processes(Settings(database_url="sqlite:///padbench.sqlite3", server_processes=4)) == 4


@pytest.mark.parametrize("value", ["0", "65", "many"])
def test_a_workers_count_out_of_bounds_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv("PADBENCH_SERVER_PROCESSES", value)
    assert cli.load_settings() is None
    assert "server_processes" in capsys.readouterr().err


def test_dev_with_several_processes_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(host=None, port=None, dev=True, workers=2, health_port=None, log_level="warning")
    assert cli.run_server(args) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "--dev" in error and "--workers 1" in error


def test_a_health_port_must_differ_from_the_apis(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PADBENCH_PORT", "8000")
    monkeypatch.setenv("PADBENCH_HEALTH_PORT", "8000")
    assert cli.load_settings() is None
    assert "PADBENCH_HEALTH_PORT=8000" in capsys.readouterr().err


def test_several_processes_get_the_health_process_beats_directory(tmp_path: Path) -> None:
    """uvicorn's process manager starts each API process from the environment: the beats' directory goes there."""
    settings = Settings(health_port=8001, health_beats_dir=tmp_path)
    assert cli.settings_environment(settings)["PADBENCH_HEALTH_BEATS_DIR"] == str(tmp_path)
    assert "PADBENCH_HEALTH_BEATS_DIR" not in cli.settings_environment(Settings())
