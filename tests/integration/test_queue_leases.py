"""Leases: heartbeats, fencing (zombie results), the reaper, attempts, release, fail and cancel.

Time is faked in SQL (`expire_lease` moves the deadline into the past by the database clock): no sleeps.
"""

from __future__ import annotations

from padbench.server import queue
from padbench.server.db.engine import Database
from padbench.server.db.reads import find_result
from tests.integration.conftest import add_worker, claim, expire_lease, job_row, reap, result_document, submit

SPEC = {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}


def heartbeat(database: Database, job_id: int, token: str, progress: float | None = None):
    with database.write.begin() as session:
        return queue.extend_lease(session, job_id, token, lease_seconds=60, progress=progress, message="step")


def complete(database: Database, job_id: int, token: str) -> bool:
    with database.write.begin() as session:
        return queue.complete_job(session, job_id, token, result_document(SPEC))


def test_heartbeat_extends_the_lease_and_records_progress(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "w"))
    extension = heartbeat(queue_db, job_id, job.lease_token, progress=0.25)
    assert extension is not None and not extension.cancel_requested
    assert extension.lease_expires_at >= job.lease_expires_at
    stored = job_row(queue_db, job_id)
    assert (stored.progress, stored.progress_message) == (0.25, "step")
    assert heartbeat(queue_db, job_id, "not-the-token") is None


def test_expired_lease_is_requeued_once_and_reclaimed(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    claim(queue_db, add_worker(queue_db, "w1"))
    expire_lease(queue_db, job_id)
    assert reap(queue_db) == 1
    assert reap(queue_db) == 0  # idempotent
    requeued = job_row(queue_db, job_id)
    assert (requeued.status, requeued.lease_token, requeued.worker_id, requeued.attempts) == ("queued", None, None, 1)
    assert claim(queue_db, add_worker(queue_db, "w2")).attempts == 2


def test_a_result_is_recorded_exactly_once(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "w"))
    assert complete(queue_db, job_id, job.lease_token)
    assert not complete(queue_db, job_id, job.lease_token)
    assert not complete(queue_db, job_id, "not-a-lease-of-this-job")
    assert job_row(queue_db, job_id).status == "succeeded"
    with queue_db.read() as session:
        assert find_result(session, job_id) is not None


def test_spent_attempts_end_in_failed(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)  # max_attempts = 3
    worker = add_worker(queue_db, "crashy")
    for attempt in (1, 2, 3):
        assert claim(queue_db, worker).attempts == attempt
        expire_lease(queue_db, job_id)
        reap(queue_db)
    failed = job_row(queue_db, job_id)
    assert (failed.status, failed.attempts) == ("failed", 3)
    assert "no attempts left" in failed.error and failed.finished_at is not None
    assert claim(queue_db, worker) is None


def test_fail_records_error_and_traceback(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "w"))
    with queue_db.write.begin() as session:
        assert queue.fail_job(session, job_id, job.lease_token, "RuntimeError: boom", "Traceback …")
    failed = job_row(queue_db, job_id)
    assert (failed.status, failed.error, failed.traceback) == ("failed", "RuntimeError: boom", "Traceback …")


def test_release_requeues_and_gives_the_attempt_back(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "w"))
    with queue_db.write.begin() as session:
        assert queue.release_job(session, job_id, job.lease_token)
        assert not queue.release_job(session, job_id, job.lease_token)
    released = job_row(queue_db, job_id)
    assert (released.status, released.attempts, released.lease_token) == ("queued", 0, None)


def test_cancel_queued_is_immediate(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC, submitter="alice")
    with queue_db.write.begin() as session:
        assert queue.request_cancel(session, job_id, submitter="bob") is None  # not bob's job
        assert queue.request_cancel(session, job_id, submitter="alice") == "cancelled"
        assert queue.request_cancel(session, job_id, submitter=None) is None  # already final
    assert job_row(queue_db, job_id).finished_at is not None
    assert claim(queue_db, add_worker(queue_db, "w")) is None


def test_cancel_running_reaches_the_worker_then_ends_cancelled(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "w"))
    with queue_db.write.begin() as session:
        assert queue.request_cancel(session, job_id, submitter=None) == "running"
    assert heartbeat(queue_db, job_id, job.lease_token).cancel_requested
    with queue_db.write.begin() as session:
        assert queue.fail_job(session, job_id, job.lease_token, "cancelled by request", None)
    assert job_row(queue_db, job_id).status == "cancelled"


def test_expired_lease_of_a_cancelled_job_ends_cancelled_not_requeued(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    claim(queue_db, add_worker(queue_db, "w"))
    with queue_db.write.begin() as session:
        queue.request_cancel(session, job_id, submitter=None)
    expire_lease(queue_db, job_id)
    reap(queue_db)
    assert job_row(queue_db, job_id).status == "cancelled"
