"""Lease grace: a job whose holder is only unreachable (its heartbeats missed, the server restarting, the
network down) is not handed to another worker until its lease has been missed by PADBENCH_LEASE_GRACE_SECONDS
past its deadline; within the grace the holder's next heartbeat keeps it. Past the grace the job goes to
another worker, and the holder's next heartbeat is told its lease is lost. Time is faked in SQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update

from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import Job
from tests.integration.conftest import add_worker, claim, job_row, serve, submit
from tests.integration.test_server_jobs import SPEC, register
from tests.integration.test_server_jobs import claim as claim_over_http
from tests.integration.test_server_jobs import submit as submit_over_http

GRACE_S = 60


def lease_missed_by(database: Database, job_id: int, seconds: float) -> None:
    """Fake time in SQL: the lease's deadline passed `seconds` ago, by the database's clock."""
    with database.write.begin() as session:
        session.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=db_now(-seconds)))


def reap_with_grace(database: Database) -> int:
    with database.write.begin() as session:
        return queue.requeue_expired_leases(session, grace_seconds=GRACE_S)


def test_the_reaper_waits_out_the_grace(queue_db: Database) -> None:
    job_id = submit(queue_db)
    claim(queue_db, add_worker(queue_db, "holder"))
    lease_missed_by(queue_db, job_id, GRACE_S - 5)
    assert reap_with_grace(queue_db) == 0
    assert job_row(queue_db, job_id).status == "running"
    lease_missed_by(queue_db, job_id, GRACE_S + 1)
    assert reap_with_grace(queue_db) == 1
    assert job_row(queue_db, job_id).status == "queued"


def test_an_unreachable_holder_keeps_its_job_within_the_grace_and_loses_it_after(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'grace.sqlite3'}", tmp_path, lease_grace_seconds=GRACE_S) as server, \
            server.client("submitter") as user, server.client("worker") as workers:
        job_id = submit_over_http(user, SPEC)
        holder = claim_over_http(workers, register(workers, "holder"))
        idle = register(workers, "idle")
        assert holder is not None
        beat = {"lease_token": holder.lease_token}

        lease_missed_by(server.database, job_id, GRACE_S - 5)  # the holder's beats did not reach the server
        assert claim_over_http(workers, idle) is None  # not handed over: the holder may only be unreachable
        back = workers.post(f"/v1/leases/{job_id}/heartbeat", json=beat)
        assert back.status_code == 200, back.text  # it comes back: its lease is extended, the job runs once
        assert user.get(f"/v1/jobs/{job_id}").json()["attempts"] == 1

        lease_missed_by(server.database, job_id, GRACE_S + 1)
        taken = claim_over_http(workers, idle)
        assert taken is not None and taken.job.id == job_id and taken.job.attempts == 2
        lost = workers.post(f"/v1/leases/{job_id}/heartbeat", json=beat)
        assert lost.status_code == 409 and lost.json()["detail"].startswith("lease lost")
        assert lost.json()["job_status"] == "running"  # another worker's: the holder's worker stops its child
