"""Failed authentications in the database, so every server process behind one port counts the same ones.

Each process once kept its own counts, so a guesser whose connections were spread over N processes had N
times the limit. The rows are timed by the database clock (padbench.server.db.clock), like every other
timestamp, so processes with skewed clocks agree on the window.

`check_and_record` runs in one write transaction: on SQLite, BEGIN IMMEDIATE makes the count and the
insert one step across processes; on PostgreSQL two processes may both pass a count at the limit at the
same instant, so the limit can be passed by the requests in flight at once, never more. Rows older than
the window count for nothing and `prune` removes them (the reaper calls it every few seconds), so the
table holds at most one window of failures. Refused attempts are not stored: a flood that is refused
costs a read (the gate decides a refusal in a read session first), not a row nor the write lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, delete, insert, select
from sqlalchemy.orm import Session

from padbench.server.db.clock import db_now
from padbench.server.db.models import AuthFailure


@dataclass(frozen=True)
class FailureLimits:
    """At most `limit` failures per (address, credential) and `address_limit` per address in `window_seconds`."""

    limit: int
    window_seconds: float
    address_limit: int


def limit_reached_at(
    session: Session, where: ColumnElement[bool], limit: int, window_seconds: float
) -> tuple[datetime, datetime] | None:
    """(the failure that makes `limit` within the window, the database's now), or None below the limit.

    The `limit`-th most recent failure is the one whose ageing out frees a place: a sliding window."""
    row = session.execute(
        select(AuthFailure.failed_at, db_now())
        .where(where, AuthFailure.failed_at > db_now(-window_seconds))
        .order_by(AuthFailure.failed_at.desc())
        .offset(limit - 1)
        .limit(1)
    ).first()
    return None if row is None else (row[0], row[1])


def retry_after(session: Session, address: str, credential: str, limits: FailureLimits) -> float | None:
    """Seconds until `credential` may be tried from `address` again, or None when it is not refused."""
    waits = []
    for where, limit in (
        (AuthFailure.address == address, limits.address_limit),
        ((AuthFailure.address == address) & (AuthFailure.credential == credential), limits.limit),
    ):
        reached = limit_reached_at(session, where, limit, limits.window_seconds)
        if reached is not None:
            failed_at, now = reached
            waits.append((failed_at - now).total_seconds() + limits.window_seconds)
    return max(waits, default=None)


def record_failure(session: Session, address: str, credential: str) -> None:
    session.execute(insert(AuthFailure).values(address=address, credential=credential, failed_at=db_now()))


def check_and_record(session: Session, address: str, credential: str, limits: FailureLimits) -> float | None:
    """The wait (seconds) when this attempt is refused; otherwise records it as a failure and returns None."""
    wait = retry_after(session, address, credential, limits)
    if wait is None:
        record_failure(session, address, credential)
    return wait


def prune(session: Session, window_seconds: float) -> int:
    """Remove failures older than the window; how many were removed."""
    removed = session.execute(delete(AuthFailure).where(AuthFailure.failed_at <= db_now(-window_seconds)))
    return int(removed.rowcount or 0)  # type: ignore[attr-defined]
