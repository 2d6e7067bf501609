"""`/healthz` tells the truth: a file that fails SQLite's integrity check, a full PostgreSQL that still
takes the probe's own small write, each answers 503 with the reason; concurrent probes share one database
probe a second; `/livez` touches nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from padbench.server.core.config import Settings
from padbench.server.db.engine import Database
from padbench.server.db.health import PROBE_INTERVAL_S, STALE_LIMIT_S, HealthMonitor
from padbench.server.db.integrity import IntegrityWatch, quick_check
from padbench.server.db.migrate import upgrade_to_head
from padbench.server.db.recent_failures import RecentFailures
from tests.integration.conftest import LiveServer, serve
from tests.integration.test_retention import FakeClock
from tests.integration.test_server_database_outage import damaged_after_a_checkpoint, overwrite_pages, with_jobs
from tests.integration.test_server_jobs import SPEC

# The job inserts fail as PostgreSQL fails them when its volume is full (SQLSTATE 53100, disk_full).
DISK_FULL_TRIGGER = """
CREATE OR REPLACE FUNCTION padbench_test_disk_full() RETURNS trigger AS $$
BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END
$$ LANGUAGE plpgsql;
CREATE TRIGGER padbench_test_disk_full BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION padbench_test_disk_full();
"""
DROP_DISK_FULL_TRIGGER = "DROP TRIGGER IF EXISTS padbench_test_disk_full ON jobs"


def test_concurrent_health_checks_share_one_probe_a_second(tmp_path: Path) -> None:
    database = Database.connect(Settings(database_url=f"sqlite:///{tmp_path / 'health.sqlite3'}"))
    upgrade_to_head(database.engine)
    clock = FakeClock()
    monitor = HealthMonitor(database, 0, IntegrityWatch(database, 60), RecentFailures(60), clock=clock)

    async def storm() -> None:
        reports = await asyncio.gather(*(monitor.report() for _ in range(50)))
        assert monitor.probes == 1 and {report.database_write for report in reports} == {"ok"}
        clock.now += PROBE_INTERVAL_S / 2
        await asyncio.gather(*(monitor.report() for _ in range(50)))
        assert monitor.probes == 1  # within the second: the last report
        clock.now += PROBE_INTERVAL_S
        await asyncio.gather(*(monitor.report() for _ in range(50)))
        assert monitor.probes == 2

    try:
        asyncio.run(storm())
    finally:
        database.dispose()


def test_quick_check_names_the_damage(tmp_path: Path) -> None:
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path) as server:
        with_jobs(server)
        assert quick_check(server.database) == "ok"
        damaged_after_a_checkpoint(database_file, overwrite_pages)
        verdict = quick_check(server.database)
    assert verdict != "ok" and ("quick_check" in verdict or "corrupted" in verdict), verdict


def test_healthz_is_503_when_the_integrity_check_fails(tmp_path: Path) -> None:
    """Nothing but /healthz reads the database after the damage: the background check finds it."""
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path, integrity_check_interval_seconds=1) as server:
        with_jobs(server)
        with server.client() as anonymous:
            assert anonymous.get("/healthz").json()["integrity"] == "ok"
            damaged_after_a_checkpoint(database_file, overwrite_pages)
            response = wait_for_health(anonymous, lambda body: "database integrity:" in body.get("detail", ""))
    assert response.status_code == 503 and response.headers["retry-after"]
    assert response.json()["integrity"] != "ok"


def test_a_full_postgresql_that_still_takes_the_probe_write_is_unhealthy(live_server_pg: LiveServer) -> None:
    with live_server_pg.database.engine.begin() as connection:
        connection.exec_driver_sql(DISK_FULL_TRIGGER)
    try:
        with live_server_pg.client("submitter") as user, live_server_pg.client() as anonymous:
            assert anonymous.get("/healthz").status_code == 200
            refused = user.post("/v1/jobs", json={"spec": SPEC})
            assert refused.status_code == 507, refused.text
            time.sleep(PROBE_INTERVAL_S)  # past the shared probe's second, so the next report is a new one
            health = anonymous.get("/healthz")
    finally:
        with live_server_pg.database.engine.begin() as connection:
            connection.execute(text(DROP_DISK_FULL_TRIGGER))
    body = health.json()
    assert health.status_code == 503 and body["database_write"] == "ok"  # the probe's own write still goes in
    [failure] = body["recent_failures"]
    assert failure.startswith("a request failed: the database's disk is full (") and failure.endswith(" s ago)")
    assert "the database's disk is full" in body["detail"]


def test_livez_answers_without_the_database(tmp_path: Path) -> None:
    database_file = tmp_path / "padbench.sqlite3"
    with serve(f"sqlite:///{database_file}", tmp_path) as server, server.client() as anonymous:
        database_file.unlink()
        assert anonymous.get("/healthz").status_code == 503
        live = anonymous.get("/livez")
    assert live.status_code == 200 and live.json() == {"status": "ok"}


def wait_for_health(http: httpx.Client, condition: Callable[[dict[str, Any]], bool],
                    timeout_s: float = 30) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while True:
        response = http.get("/healthz")
        if condition(response.json()):
            return response
        assert time.monotonic() < deadline, f"/healthz never showed it: {response.text}"
        time.sleep(0.2)


def test_a_probe_stuck_behind_writes_never_holds_a_health_check(tmp_path: Path, monkeypatch: Any) -> None:
    """A probe that cannot get the write lock: callers get the last report at once while it is recent, and
    "no answer" once it is not, never a wait as long as the writes'."""
    database = Database.connect(Settings(database_url=f"sqlite:///{tmp_path / 'health.sqlite3'}"))
    upgrade_to_head(database.engine)
    clock = FakeClock()
    monitor = HealthMonitor(database, 0, IntegrityWatch(database, 60), RecentFailures(60), clock=clock)
    monkeypatch.setattr("padbench.server.db.health.PROBE_ANSWER_LIMIT_S", 0.2)
    lock = database.writer_lock
    assert lock is not None

    async def while_writes_hold_the_lock() -> None:
        assert (await monitor.report()).problems == []
        lock.__enter__()  # a long write: the next probe's own write waits behind it
        clock.now += PROBE_INTERVAL_S
        started = time.monotonic()
        recent = await monitor.report()
        assert recent.problems == [] and time.monotonic() - started < 0.5
        clock.now += STALE_LIMIT_S
        stale = await monitor.report()
        assert stale.problems == ["database: no answer within 0.2 s"]

    try:
        asyncio.run(while_writes_hold_the_lock())
    finally:
        lock.__exit__()
        monitor.close()
        database.dispose()
