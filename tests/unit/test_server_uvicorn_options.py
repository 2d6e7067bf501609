"""`padbench server` hands uvicorn its limits: keep-alive timeout, connection limit, backlog and the
largest request head, on the h11 protocol that honours that last one; and it trusts X-Forwarded-For from
exactly the proxies PADBENCH_TRUSTED_PROXIES names, from none by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

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



def served_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> uvicorn.Config:
    """The uvicorn config `padbench server --dev` would serve with, from the environment monkeypatch set."""
    configs: list[uvicorn.Config] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: configs.append(uvicorn.Config(app, **options)))
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert main(["server", "--dev"]) == 0
    [config] = configs
    return config


def test_forwarded_headers_are_ignored_unless_proxies_are_named(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")  # uvicorn's own variable must not widen what is trusted
    config = served_config(monkeypatch, tmp_path)
    assert config.proxy_headers is False and config.forwarded_allow_ips == []
    config.load()
    assert not isinstance(config.loaded_app, ProxyHeadersMiddleware)


def test_trusted_proxies_are_exactly_the_ones_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "*")
    monkeypatch.setenv("PADBENCH_TRUSTED_PROXIES", "172.28.0.10, fd00::/64")
    config = served_config(monkeypatch, tmp_path)
    assert config.proxy_headers is True and config.forwarded_allow_ips == ["172.28.0.10", "fd00::/64"]
    config.load()
    assert isinstance(config.loaded_app, ProxyHeadersMiddleware)


@pytest.mark.parametrize("proxies", ["*", "proxy", "10.0.0.1/8", "10.0.0.1,nginx"])
def test_a_trusted_proxy_that_is_no_address_stops_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str],
                                                             proxies: str) -> None:
    monkeypatch.setenv("PADBENCH_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    monkeypatch.setenv("PADBENCH_TRUSTED_PROXIES", proxies)
    assert main(["server", "--dev"]) == 2
    assert "PADBENCH_TRUSTED_PROXIES" in capsys.readouterr().err
