"""`padbench server` and `padbench db upgrade`: refusals and migrations in-process, --dev as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from padbench.cli import main
from tests.integration.conftest import loopback_socket

PADBENCH = [sys.executable, "-m", "padbench.cli"]


def get_when_up(url: str, token: str, process: subprocess.Popen[str], timeout_s: float = 30) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=2)
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_server_refuses_to_start_without_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'db'}")
    monkeypatch.setenv("PADBENCH_TOKENS_FILE", "")  # empty reads as unset
    assert main(["server"]) == 2
    assert "PADBENCH_TOKENS_FILE is not set" in capsys.readouterr().err


def test_server_refuses_short_or_default_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("submitter:alice:changeme-changeme-changeme-1\n", encoding="utf-8")
    monkeypatch.setenv("PADBENCH_TOKENS_FILE", str(tokens))
    assert main(["server"]) == 2
    error = capsys.readouterr().err
    assert f"{tokens}:1" in error and "default" in error


def test_dev_mode_is_refused_off_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["server", "--dev", "--host", "0.0.0.0"]) == 2
    assert "loopback" in capsys.readouterr().err


def test_db_upgrade_creates_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    database = tmp_path / "fresh.sqlite3"
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{database}")
    assert main(["db", "upgrade"]) == 0
    assert "latest migration" in capsys.readouterr().out and database.exists()


def test_dev_server_prints_working_tokens_once(tmp_path: Path) -> None:
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    env = os.environ | {"PADBENCH_DATABASE_URL": f"sqlite:///{tmp_path / 'dev.sqlite3'}"}
    command = [*PADBENCH, "server", "--dev", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = [process.stdout.readline() for _ in range(5)]
        tokens = dict(line.split() for line in banner[1:4])
        assert set(tokens) == {"submitter", "worker", "admin"}
        response = get_when_up(f"http://127.0.0.1:{port}/v1/jobs", tokens["submitter"], process)
        assert response.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
