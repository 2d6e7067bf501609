"""Retention: finished jobs older than a number of days are removed with everything that hangs off them;
queued and running jobs never are. Time is faked in SQL (finished_at moved into the past by the database
clock), on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select, update

from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import Job, JobAttempt, JobRequirement, JobResult
from padbench.server.retention import PRUNE_INTERVAL_SECONDS, Retention
from tests.integration.conftest import LiveServer, add_worker, claim, result_document, submit
from tests.integration.test_server_jobs import SPEC

DAY = 24 * 3600.0


def finish_one_of_each(database: Database) -> dict[str, int]:
    """A succeeded job (with its result and its attempt), a failed and a cancelled one, one queued, one running."""
    ids = {name: submit(database, SPEC) for name in ("succeeded", "failed", "running", "cancelled", "queued")}
    worker = add_worker(database, "w")
    with database.write.begin() as session:
        queue.request_cancel(session, ids["cancelled"], submitter=None)
    for name in ("succeeded", "failed", "running"):
        job = claim(database, worker)
        assert job is not None and job.id == ids[name] and job.lease_token is not None
        with database.write.begin() as session:
            if name == "succeeded":
                assert queue.complete_job(session, job.id, job.lease_token, result_document(SPEC))
            elif name == "failed":
                assert queue.fail_job(session, job.id, job.lease_token, "oom: out of memory", None)
    return ids


def age_jobs(database: Database, days: float, *job_ids: int) -> None:
    """Fake time in SQL: the jobs ended `days` ago, by the database's clock (queued and running ones too, as
    if they had: the status alone must keep them)."""
    with database.write.begin() as session:
        session.execute(update(Job).where(Job.id.in_(job_ids)).values(finished_at=db_now(-days * DAY)))


def remaining(database: Database, column: Any) -> set[int]:
    with database.read() as session:
        return set(session.scalars(select(column)))


def prune(database: Database, older_than_days: int) -> int:
    with database.write.begin() as session:
        return queue.delete_finished_jobs(session, older_than_days=older_than_days)


def test_old_finished_jobs_go_with_their_results_requirements_and_attempts(queue_db: Database) -> None:
    ids = finish_one_of_each(queue_db)
    age_jobs(queue_db, 8, *ids.values())
    assert remaining(queue_db, JobResult.job_id) == {ids["succeeded"]}
    assert remaining(queue_db, JobAttempt.job_id) == {ids["succeeded"], ids["failed"], ids["running"]}
    assert prune(queue_db, 7) == 3
    assert remaining(queue_db, Job.id) == {ids["queued"], ids["running"]}
    assert remaining(queue_db, JobRequirement.job_id) == {ids["queued"], ids["running"]}
    assert remaining(queue_db, JobResult.job_id) == set()
    assert remaining(queue_db, JobAttempt.job_id) == {ids["running"]}
    assert prune(queue_db, 7) == 0  # idempotent


def test_jobs_finished_within_the_window_stay(queue_db: Database) -> None:
    ids = finish_one_of_each(queue_db)
    age_jobs(queue_db, 6.9, ids["succeeded"])
    age_jobs(queue_db, 7.1, ids["failed"])
    assert prune(queue_db, 7) == 1  # the failed job; the cancelled one ended just now
    assert remaining(queue_db, Job.id) == set(ids.values()) - {ids["failed"]}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_server_prunes_at_most_once_a_minute_and_only_when_configured(queue_db: Database) -> None:
    clock = FakeClock()
    retention = Retention(7, clock=clock)
    first, second = submit(queue_db, SPEC), submit(queue_db, SPEC)
    with queue_db.write.begin() as session:
        for job_id in (first, second):
            queue.request_cancel(session, job_id, submitter=None)
    age_jobs(queue_db, 8, first)
    assert Retention(None, clock=clock).prune_if_due(queue_db) == 0
    assert retention.prune_if_due(queue_db) == 1
    age_jobs(queue_db, 8, second)
    clock.now += PRUNE_INTERVAL_SECONDS - 1
    assert retention.prune_if_due(queue_db) == 0  # not yet due
    clock.now += 1
    assert retention.prune_if_due(queue_db) == 1
    with queue_db.read() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 0


def test_admins_prune_on_demand_over_http(any_live_server: LiveServer) -> None:
    ids = finish_one_of_each(any_live_server.database)
    age_jobs(any_live_server.database, 30, *ids.values())
    with any_live_server.client("admin") as admin, any_live_server.client("submitter") as alice, \
            any_live_server.client("viewer") as viewer:
        for outsider in (alice, viewer):
            refused = outsider.post("/v1/jobs/prune", json={"older_than_days": 1})
            assert refused.status_code == 403 and "admin" in refused.json()["detail"]
        assert admin.post("/v1/jobs/prune", json={"older_than_days": 31}).json() == {"removed": 0}
        assert admin.post("/v1/jobs/prune", json={"older_than_days": 29}).json() == {"removed": 3}
        assert admin.get(f"/v1/jobs/{ids['succeeded']}").status_code == 404
        assert {job["id"] for job in admin.get("/v1/jobs").json()["items"]} == {ids["queued"], ids["running"]}


@pytest.mark.parametrize("days", [0, 36_501, "a week"])
def test_a_prune_outside_the_bounds_is_422_naming_the_field(live_server: LiveServer, days: Any) -> None:
    with live_server.client("admin") as admin:
        response = admin.post("/v1/jobs/prune", json={"older_than_days": days})
        assert response.status_code == 422
        assert [error["loc"] for error in response.json()["detail"]] == [["older_than_days"]]
