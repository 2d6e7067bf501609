"""Settings: PADBENCH_* variables, safe defaults, refusals naming the variable."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from padbench.server.core.config import Settings, is_loopback
from padbench.server.db.engine import normalize_database_url


def test_defaults_are_loopback_and_a_sqlite_file_in_the_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PADBENCH_DATABASE_URL", "PADBENCH_TOKENS_FILE", "PADBENCH_HOST", "PADBENCH_LEASE_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings()
    assert settings.host == "127.0.0.1" and settings.port == 8000
    assert (settings.lease_seconds, settings.max_attempts) == (60, 3)
    assert settings.database_url.startswith("sqlite:///") and "padbench" in settings.database_url
    assert settings.tokens_file is None and not settings.dev


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADBENCH_LEASE_SECONDS", "30")
    monkeypatch.setenv("PADBENCH_MAX_ATTEMPTS", "5")
    monkeypatch.setenv("PADBENCH_DATABASE_URL", "postgresql://db/padbench")
    settings = Settings()
    assert (settings.lease_seconds, settings.max_attempts, settings.is_sqlite) == (30, 5, False)


@pytest.mark.parametrize(("field", "value"), [("lease_seconds", 0), ("max_attempts", 0), ("max_body_bytes", 10)])
def test_meaningless_values_are_refused_by_name(field: str, value: int) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


def test_dev_tokens_only_on_loopback() -> None:
    assert Settings(dev=True, host="::1").dev
    with pytest.raises(ValidationError, match="PADBENCH_HOST"):
        Settings(dev=True, host="0.0.0.0")


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.2") and not is_loopback("example.org")


def test_postgresql_urls_use_psycopg3() -> None:
    assert normalize_database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_database_url("sqlite:///x.db") == "sqlite:///x.db"


def test_retention_is_off_unless_set_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADBENCH_RETENTION_DAYS", raising=False)
    assert Settings().retention_days is None
    monkeypatch.setenv("PADBENCH_RETENTION_DAYS", "")
    assert Settings().retention_days is None
    monkeypatch.setenv("PADBENCH_RETENTION_DAYS", "90")
    assert Settings().retention_days == 90
    for days in (0, 36_501):
        with pytest.raises(ValidationError, match="retention_days"):
            Settings(retention_days=days)
