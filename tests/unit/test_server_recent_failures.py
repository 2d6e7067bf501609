"""The database failures `/healthz` remembers: each for its window, a moment's contention never."""

from __future__ import annotations

from padbench.server.db.failures import DatabaseFailure
from padbench.server.db.recent_failures import RecentFailures


def test_a_failure_is_reported_for_its_window_then_forgotten() -> None:
    now = [1000.0]
    recent = RecentFailures(window_s=60, clock=lambda: now[0])
    recent.record(DatabaseFailure.disk_full)
    now[0] += 12.5
    assert recent.recent() == ["a request failed: the database's disk is full (12 s ago)"]
    now[0] += 48
    assert recent.recent() == []


def test_a_repeated_failure_is_reported_once_from_its_latest_occurrence() -> None:
    now = [1000.0]
    recent = RecentFailures(window_s=60, clock=lambda: now[0])
    recent.record(DatabaseFailure.corrupt)
    now[0] += 50
    recent.record(DatabaseFailure.corrupt)
    now[0] += 30
    assert recent.recent() == [f"a request failed: {DatabaseFailure.corrupt.value} (30 s ago)"]


def test_contention_is_not_a_failure_to_report() -> None:
    recent = RecentFailures(window_s=60)
    for momentary in (DatabaseFailure.busy, DatabaseFailure.no_connection_free, DatabaseFailure.connection_lost):
        recent.record(momentary)
    assert recent.recent() == []
