"""A job across nodes claimed whole by one worker that hands it to a scheduler (`max_nodes` in its
capabilities), on SQLite and PostgreSQL: the claim is a one-node job's, and no gang path touches it."""

from __future__ import annotations

from sqlalchemy import select, update

from padbench.contract.api import Capabilities
from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import HELD_BY_GANG, HELD_BY_WORKER, GangMember, Job, JobAttempt
from padbench.server.db.workers import register_worker
from padbench.server.requirements import offered_capabilities
from tests.integration.conftest import CPU_KERNELS, add_worker, claim, expire_lease, job_row, reap, submit
from tests.integration.test_queue_gangs import ACROSS_TWO, beat, join


def add_scheduler_worker(database: Database, name: str, max_nodes: int) -> tuple[int, set, int]:
    """A worker as `padbench worker --slurm` registers it: a node's capabilities, and its partition's nodes."""
    capabilities = Capabilities(device="cpu", kernels=CPU_KERNELS, max_nodes=max_nodes)
    with database.write.begin() as session:
        worker, _ = register_worker(session, name=name, principal="test", capabilities=capabilities.model_dump())
    return worker.id, offered_capabilities(capabilities), max_nodes


def claim_whole(database: Database, worker: tuple[int, set, int]) -> Job | None:
    with database.write.begin() as session:
        return queue.claim_next_job(session, worker_id=worker[0], offered=worker[1], lease_seconds=60,
                                    max_nodes=worker[2])


def held_by(database: Database, lease_token: str | None) -> str | None:
    with database.read() as session:
        return session.scalar(select(JobAttempt.held_by).where(JobAttempt.lease_token == lease_token))


def test_a_scheduler_worker_with_enough_nodes_claims_a_job_across_nodes_whole(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    assert claim_whole(queue_db, add_scheduler_worker(queue_db, "slurm-one-node", max_nodes=1)) is None
    assert claim(queue_db, add_worker(queue_db, "plain")) is None
    assert submit(queue_db, ACROSS_TWO | {"nodes": 3}) > job_id
    worker = add_scheduler_worker(queue_db, "slurm-two-nodes", max_nodes=2)
    job = claim_whole(queue_db, worker)
    assert job is not None and (job.id, job.status, job.attempts, job.worker_id) == (job_id, "running", 1, worker[0])
    assert held_by(queue_db, job.lease_token) == HELD_BY_WORKER
    assert claim_whole(queue_db, worker) is None  # three nodes are more than its partition has


def test_the_gang_paths_leave_a_whole_claim_alone_and_its_failure_ends_it_as_a_one_node_jobs_does(
        queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    forming = join(queue_db, add_worker(queue_db, "node-a"))  # a gang starts to form for it meanwhile
    job = claim_whole(queue_db, add_scheduler_worker(queue_db, "slurm", max_nodes=4))
    assert forming is not None and job is not None and job.id == job_id
    assert beat(queue_db, forming) is None  # the forming member learns the job went on without its gang
    with queue_db.write.begin() as session:
        session.execute(update(GangMember).values(expires_at=db_now(-3600), joined_at=db_now(-3600)))
        assert queue.requeue_gangs_missing_a_member(session, grace_seconds=0) == 0
        # Only the forming member's row goes (by either path); the job is not a gang's to move.
        removed = queue.dissolve_unformed_gangs(session, form_seconds=0, grace_seconds=0)
        assert removed + queue.remove_stale_members(session) == 1
        assert queue.start_full_gang(session, job_id, lease_seconds=60) is None
    assert job_row(queue_db, job_id).lease_token == job.lease_token
    assert job.lease_token is not None
    with queue_db.write.begin() as session:
        assert queue.fail_job(session, job_id, job.lease_token, "srun: error: node lost", None)
    failed = job_row(queue_db, job_id)
    assert (failed.status, failed.attempts, failed.error) == ("failed", 1, "srun: error: node lost")


def test_a_whole_claim_beats_resumes_reports_and_releases_as_a_one_node_job(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    worker = add_scheduler_worker(queue_db, "slurm", max_nodes=2)
    first = claim_whole(queue_db, worker)
    assert first is not None and first.lease_token is not None
    with queue_db.write.begin() as session:
        assert queue.release_job(session, job_id, first.lease_token)
    assert (job_row(queue_db, job_id).status, job_row(queue_db, job_id).attempts) == ("queued", 0)
    job = claim_whole(queue_db, worker)
    assert job is not None and job.lease_token is not None
    expire_lease(queue_db, job_id)
    assert reap(queue_db) == 1  # missed beats past the grace: requeued, as any job
    with queue_db.write.begin() as session:
        resumed = queue.resume_lease(session, job_id, job.lease_token, lease_seconds=60, progress=0.5,
                                     message="Slurm job 812: RUNNING")
        assert resumed is not None and not resumed.cancel_requested
        assert queue.complete_job(session, job_id, job.lease_token, {"kind": "padding"})
    done = job_row(queue_db, job_id)
    assert (done.status, done.attempts, done.worker_id) == ("succeeded", 1, worker[0])


def test_a_reaped_gang_attempt_is_never_resumed_though_its_members_stay(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    join(queue_db, add_worker(queue_db, "node-a")), join(queue_db, add_worker(queue_db, "node-b"))
    token = job_row(queue_db, job_id).lease_token
    assert token is not None and held_by(queue_db, token) == HELD_BY_GANG
    expire_lease(queue_db, job_id)
    assert reap(queue_db) == 1
    with queue_db.write.begin() as session:
        assert queue.remove_stale_members(session) == 0  # they may still report the attempt's result
        assert queue.resume_lease(session, job_id, token, lease_seconds=60, progress=None, message=None) is None
