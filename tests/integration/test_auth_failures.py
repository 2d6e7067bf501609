"""The authentication failure limiter's counts in the database (SQLite and PostgreSQL): per (address,
credential) and per address, in a sliding window timed by the database clock (time faked in SQL), pruned
past the window."""

from __future__ import annotations

import pytest
from sqlalchemy import func, insert, select

from padbench.server.db import auth_failures
from padbench.server.db.auth_failures import FailureLimits
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import AuthFailure

WINDOW = 60.0


def fail(database: Database, address: str, credential: str, times: int, limits: FailureLimits) -> None:
    """`times` failures, each one let through (counted, not refused)."""
    for _ in range(times):
        with database.writing() as session:
            assert auth_failures.check_and_record(session, address, credential, limits) is None


def retry_after(database: Database, address: str, credential: str, limits: FailureLimits) -> float | None:
    with database.writing() as session:
        return auth_failures.retry_after(session, address, credential, limits)


def failed_ago(database: Database, address: str, credential: str, *ages_seconds: float) -> None:
    """Fake time in SQL: failures that happened these many seconds ago by the database's clock."""
    with database.writing() as session:
        for age in ages_seconds:
            session.execute(insert(AuthFailure).values(address=address, credential=credential, failed_at=db_now(-age)))


def test_one_credential_is_refused_at_the_limit_until_its_oldest_failure_ages_out(queue_db: Database) -> None:
    limits = FailureLimits(limit=3, window_seconds=WINDOW, address_limit=100)
    failed_ago(queue_db, "10.0.0.1", "aaaa", 70, 10)  # the first is out of the window already
    assert retry_after(queue_db, "10.0.0.1", "aaaa", limits) is None
    failed_ago(queue_db, "10.0.0.1", "aaaa", 50, 30)
    # Three in the window: refused until the oldest of them (50 s ago) leaves it.
    assert retry_after(queue_db, "10.0.0.1", "aaaa", limits) == pytest.approx(WINDOW - 50, abs=1)
    failed_ago(queue_db, "10.0.0.1", "aaaa", 5)  # a fourth, more recent: the limit-th most recent is 30 s old
    assert retry_after(queue_db, "10.0.0.1", "aaaa", limits) == pytest.approx(WINDOW - 30, abs=1)


def test_a_refused_attempt_is_not_stored(queue_db: Database) -> None:
    limits = FailureLimits(limit=2, window_seconds=WINDOW, address_limit=100)
    fail(queue_db, "10.0.0.1", "aaaa", 2, limits)
    for _ in range(5):
        with queue_db.writing() as session:
            assert auth_failures.check_and_record(session, "10.0.0.1", "aaaa", limits) is not None
    with queue_db.read() as session:
        assert session.scalar(select(func.count()).select_from(AuthFailure)) == 2


def test_other_credentials_and_addresses_are_not_refused(queue_db: Database) -> None:
    limits = FailureLimits(limit=3, window_seconds=WINDOW, address_limit=100)
    fail(queue_db, "10.0.0.1", "aaaa", 3, limits)
    assert retry_after(queue_db, "10.0.0.1", "aaaa", limits) is not None
    assert retry_after(queue_db, "10.0.0.1", "bbbb", limits) is None
    assert retry_after(queue_db, "10.0.0.2", "aaaa", limits) is None


def test_an_address_varying_its_credentials_is_refused_at_the_address_limit(queue_db: Database) -> None:
    limits = FailureLimits(limit=3, window_seconds=WINDOW, address_limit=5)
    for attempt in range(4):
        fail(queue_db, "10.0.0.1", f"guess{attempt}", 1, limits)
    failed_ago(queue_db, "10.0.0.1", "guess4", 20)
    assert retry_after(queue_db, "10.0.0.1", "a-new-guess", limits) == pytest.approx(WINDOW - 20, abs=1)
    assert retry_after(queue_db, "10.0.0.2", "a-new-guess", limits) is None


def test_failures_past_the_window_are_pruned(queue_db: Database) -> None:
    limits = FailureLimits(limit=3, window_seconds=WINDOW, address_limit=100)
    failed_ago(queue_db, "10.0.0.1", "aaaa", WINDOW + 1, WINDOW + 30)
    fail(queue_db, "10.0.0.1", "bbbb", 1, limits)
    with queue_db.writing() as session:
        assert auth_failures.prune(session, WINDOW) == 2
    with queue_db.read() as session:
        assert session.scalars(select(AuthFailure.credential)).all() == ["bbbb"]
        assert session.scalar(select(func.count()).where(AuthFailure.failed_at > db_now(-WINDOW))) == 1
