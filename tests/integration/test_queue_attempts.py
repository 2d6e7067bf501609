"""Attempts: a finished result is kept whichever of the job's leases reports it, the first result wins,
and a heartbeat resumes a lease the reaper took but nobody claimed again.

Time is faked in SQL (`expire_lease` moves the deadline into the past by the database clock): no sleeps.
"""

from __future__ import annotations

from sqlalchemy import func, select, update

from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import Job, JobAttempt
from padbench.server.db.reads import find_result, find_result_lease
from padbench.server.queue import LeaseExtension
from tests.integration.conftest import add_worker, claim, expire_lease, job_row, reap, submit
from tests.integration.test_queue_leases import SPEC, complete, heartbeat


def beat(database: Database, job_id: int, token: str) -> LeaseExtension | None:
    """A heartbeat as the server answers it: extend the current lease, else resume a reaped one."""
    with database.write.begin() as session:
        return (queue.extend_lease(session, job_id, token, lease_seconds=60, progress=None, message=None)
                or queue.resume_lease(session, job_id, token, lease_seconds=60, progress=0.5, message="resumed"))


def expire_and_reap(database: Database, job_id: int) -> None:
    """The lease ran out and the reaper took it; the claims made so far lie a lease length in the past, as
    they would by then (the next claim is then later by the clock, even on a fast machine)."""
    expire_lease(database, job_id)
    with database.write.begin() as session:
        session.execute(update(JobAttempt).where(JobAttempt.job_id == job_id).values(claimed_at=db_now(-60)))
    reap(database)


def reclaimed(database: Database) -> tuple[int, Job, Job]:
    """A job whose first lease ran out and was reaped, then claimed by another worker: its id, the first
    lease (a worker that may still be running it) and the second."""
    job_id = submit(database, SPEC)
    first = claim(database, add_worker(database, "slow"))
    expire_and_reap(database, job_id)
    second = claim(database, add_worker(database, "fast"))
    assert first is not None and second is not None and second.attempts == 2
    return job_id, first, second


def fail(database: Database, job_id: int, token: str) -> bool:
    with database.write.begin() as session:
        return queue.fail_job(session, job_id, token, "RuntimeError: late", None)


def result_lease(database: Database, job_id: int) -> str | None:
    with database.read() as session:
        return find_result_lease(session, job_id)


def attempts_recorded(database: Database, job_id: int) -> int:
    with database.read() as session:
        return session.scalar(select(func.count()).where(JobAttempt.job_id == job_id)) or 0


def test_every_claim_records_its_attempt(queue_db: Database) -> None:
    job_id, first, second = reclaimed(queue_db)
    with queue_db.read() as session:
        rows = session.scalars(select(JobAttempt).where(JobAttempt.job_id == job_id)).all()
    assert {(row.lease_token, row.worker_id) for row in rows} == {(first.lease_token, first.worker_id),
                                                                   (second.lease_token, second.worker_id)}


def test_a_result_reported_after_the_lease_expired_but_before_the_reaper_is_kept(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "slow"))
    expire_lease(queue_db, job_id)
    assert complete(queue_db, job_id, job.lease_token)
    done = job_row(queue_db, job_id)
    assert (done.status, done.attempts, done.lease_token) == ("succeeded", 1, None)
    assert result_lease(queue_db, job_id) == job.lease_token
    assert reap(queue_db) == 0


def test_an_expired_lease_nobody_took_is_extended_by_its_heartbeat(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "slow"))
    expire_lease(queue_db, job_id)
    assert heartbeat(queue_db, job_id, job.lease_token) is not None
    assert reap(queue_db) == 0  # the deadline is in the future again
    assert job_row(queue_db, job_id).lease_token == job.lease_token


def test_a_result_reported_after_the_reaper_requeued_the_job_is_kept(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    worker = add_worker(queue_db, "slow")
    job = claim(queue_db, worker)
    expire_lease(queue_db, job_id)
    assert reap(queue_db) == 1
    assert complete(queue_db, job_id, job.lease_token)
    done = job_row(queue_db, job_id)
    assert (done.status, done.attempts, done.worker_id) == ("succeeded", 1, worker[0])
    assert claim(queue_db, add_worker(queue_db, "idle")) is None  # nothing left to run twice


def test_after_a_reclaim_the_first_result_wins_and_the_other_lease_is_cleared(queue_db: Database) -> None:
    job_id, slow, fast = reclaimed(queue_db)
    assert complete(queue_db, job_id, slow.lease_token)  # the first result, from the earlier attempt
    done = job_row(queue_db, job_id)
    assert (done.status, done.worker_id, done.lease_token, done.attempts) == ("succeeded", slow.worker_id, None, 2)
    assert beat(queue_db, job_id, fast.lease_token) is None  # the other attempt learns on its next heartbeat
    assert not complete(queue_db, job_id, fast.lease_token)  # the second result: refused, nothing replaced
    assert not complete(queue_db, job_id, slow.lease_token)  # a retry changes nothing either...
    assert result_lease(queue_db, job_id) == slow.lease_token  # ...and is recognised as the winner's


def test_a_result_from_the_current_lease_wins_over_a_later_one_from_the_reaped_attempt(queue_db: Database) -> None:
    job_id, slow, fast = reclaimed(queue_db)
    assert complete(queue_db, job_id, fast.lease_token)
    assert not complete(queue_db, job_id, slow.lease_token)
    assert (result_lease(queue_db, job_id), job_row(queue_db, job_id).worker_id) == (fast.lease_token, fast.worker_id)


def test_a_heartbeat_resumes_a_requeued_lease_so_the_job_does_not_run_twice(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    worker = add_worker(queue_db, "slow")
    job = claim(queue_db, worker)
    expire_lease(queue_db, job_id)
    reap(queue_db)
    assert heartbeat(queue_db, job_id, job.lease_token) is None  # not the current lease any more...
    resumed = beat(queue_db, job_id, job.lease_token)  # ...but the latest attempt's, and nobody claimed the job
    assert resumed is not None and not resumed.cancel_requested
    running = job_row(queue_db, job_id)
    assert (running.status, running.lease_token, running.worker_id, running.attempts) == (
        "running", job.lease_token, worker[0], 1)
    assert (running.progress, running.progress_message) == (0.5, "resumed")
    assert claim(queue_db, add_worker(queue_db, "other")) is None
    assert attempts_recorded(queue_db, job_id) == 1


def test_only_the_latest_attempt_resumes_a_requeued_lease(queue_db: Database) -> None:
    job_id, first, second = reclaimed(queue_db)
    assert beat(queue_db, job_id, first.lease_token) is None  # the job runs under the second lease
    expire_lease(queue_db, job_id)
    reap(queue_db)
    assert beat(queue_db, job_id, first.lease_token) is None  # still not the latest attempt
    assert beat(queue_db, job_id, second.lease_token) is not None
    assert job_row(queue_db, job_id).lease_token == second.lease_token


def test_a_released_lease_can_neither_resume_nor_report(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    job = claim(queue_db, add_worker(queue_db, "stopping"))
    with queue_db.write.begin() as session:
        assert queue.release_job(session, job_id, job.lease_token)
    assert attempts_recorded(queue_db, job_id) == 0  # the attempt was given back
    assert beat(queue_db, job_id, job.lease_token) is None
    assert not complete(queue_db, job_id, job.lease_token)
    assert job_row(queue_db, job_id).status == "queued"


def test_fail_from_a_stale_lease_changes_nothing(queue_db: Database) -> None:
    job_id, slow, fast = reclaimed(queue_db)
    assert not fail(queue_db, job_id, slow.lease_token)  # reclaimed by another worker
    expire_lease(queue_db, job_id)
    assert not fail(queue_db, job_id, fast.lease_token)  # expired, not yet reaped: fail stays fenced
    running = job_row(queue_db, job_id)
    assert (running.status, running.lease_token, running.error) == ("running", fast.lease_token, None)


def test_a_job_failed_only_for_its_last_expired_lease_still_takes_the_late_result(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)  # max_attempts = 3
    worker = add_worker(queue_db, "overloaded")
    leases = []
    for _ in range(3):
        leases.append(claim(queue_db, worker).lease_token)
        expire_lease(queue_db, job_id)
        reap(queue_db)
    assert (job_row(queue_db, job_id).status, job_row(queue_db, job_id).error) == ("failed", queue.LEASE_EXPIRED_ERROR)
    assert complete(queue_db, job_id, leases[0])
    done = job_row(queue_db, job_id)
    assert (done.status, done.error, done.attempts) == ("succeeded", None, 3)
    with queue_db.read() as session:
        assert find_result(session, job_id) is not None


def test_a_heartbeat_resumes_a_job_failed_only_for_its_last_expired_lease(queue_db: Database) -> None:
    job_id = submit(queue_db, SPEC)
    worker = add_worker(queue_db, "overloaded")
    for _ in range(3):
        last = claim(queue_db, worker)
        expire_lease(queue_db, job_id)
        reap(queue_db)
    assert beat(queue_db, job_id, last.lease_token) is not None
    running = job_row(queue_db, job_id)
    assert (running.status, running.error, running.finished_at, running.attempts) == ("running", None, None, 3)


def test_a_job_that_failed_or_was_cancelled_for_a_reason_takes_no_late_result(queue_db: Database) -> None:
    failed_id, cancelled_id = submit(queue_db, SPEC), submit(queue_db, SPEC)
    worker = add_worker(queue_db, "w")
    failed, cancelled = claim(queue_db, worker), claim(queue_db, worker)
    assert fail(queue_db, failed_id, failed.lease_token)
    with queue_db.write.begin() as session:
        queue.request_cancel(session, cancelled_id, submitter=None)
    expire_lease(queue_db, cancelled_id)
    reap(queue_db)
    for job_id, job in ((failed_id, failed), (cancelled_id, cancelled)):
        assert not complete(queue_db, job_id, job.lease_token)
        assert beat(queue_db, job_id, job.lease_token) is None
    assert (job_row(queue_db, failed_id).status, job_row(queue_db, cancelled_id).status) == ("failed", "cancelled")
