"""`padbench server` hands uvicorn its limits: keep-alive timeout, connection limit, backlog and the
largest request head, on the h11 protocol that honours that last one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn

from padbench.cli import main
from padbench.server.cli import KEEP_ALIVE_SECONDS, LISTEN_BACKLOG, MAX_REQUEST_HEAD_BYTES


def test_the_settings_reach_uvicorns_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configs: list[uvicorn.Config] = []

    def run_nothing(app: Any, **options: Any) -> None:
        configs.append(uvicorn.Config(app, **options))

    monkeypatch.setattr(uvicorn, "run", run_nothing)
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    monkeypatch.setenv("PADBENCH_LIMIT_CONCURRENCY", "37")
    assert main(["server", "--dev", "--port", "8123"]) == 0
    [config] = configs
    assert (config.host, config.port, config.limit_concurrency) == ("127.0.0.1", 8123, 37)
    assert config.timeout_keep_alive == KEEP_ALIVE_SECONDS and config.backlog == LISTEN_BACKLOG
    assert config.h11_max_incomplete_event_size == MAX_REQUEST_HEAD_BYTES
    config.load()
    assert config.http_protocol_class.__name__ == "H11Protocol"

