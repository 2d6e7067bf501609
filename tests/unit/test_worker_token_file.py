"""`padbench worker --token-file`: the token is read from a file (or PADBENCH_TOKEN_FILE), never required in argv."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import SecretStr

from padbench.http import TokenFileUnreadable
from padbench.worker.cli.work import load_settings, resolved_token
from padbench.worker.runtime.settings import WorkerSettings

TOKEN = "Zq3vT9xL0pR7sW2yB5nM8cK4"


def worker_args(**given: object) -> argparse.Namespace:
    fields = {"server": None, "token": None, "token_file": None, "gpu": None, "gpus": None, "name": None,
              "job_timeout": None, "labels": None, "price_per_gpu_hour": None}
    return argparse.Namespace(**{**fields, **given})


def test_the_token_file_option_and_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "token"
    path.write_text(f"\n{TOKEN}\n")
    monkeypatch.delenv("PADBENCH_TOKEN", raising=False)
    settings = load_settings(worker_args(token_file=str(path)))
    assert settings is not None and resolved_token(settings) == TOKEN
    monkeypatch.setenv("PADBENCH_TOKEN_FILE", str(path))
    assert resolved_token(WorkerSettings()) == TOKEN
    assert resolved_token(WorkerSettings(token=SecretStr("direct"))) == "direct"


def test_an_unreadable_or_empty_token_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(TokenFileUnreadable, match="cannot read it"):
        resolved_token(WorkerSettings(token_file=tmp_path / "missing"))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(TokenFileUnreadable, match="empty"):
        resolved_token(WorkerSettings(token_file=tmp_path / "empty"))
