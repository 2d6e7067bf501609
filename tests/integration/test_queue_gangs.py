"""Gang claims of a job across several workers (`nodes: M`), on SQLite and PostgreSQL: the job starts only
when M workers hold it, a full gang takes no one more, a gang that cannot fill in time is dissolved (time
faked in SQL), a member lost mid-run takes the attempt with it, and an ended attempt's members stay while the
job can still take that attempt's result."""

from __future__ import annotations

from sqlalchemy import select, update

from padbench.server import queue
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import GangMember, Job
from tests.integration.conftest import add_worker, claim, expire_lease, job_row, reap, submit

ACROSS_TWO = {"device": "cpu", "dtype": "fp32", "attention": "sdpa", "nodes": 2, "gpus": 2}


def join(database: Database, worker: tuple[int, set], port: int = 29500) -> GangMember | None:
    with database.write.begin() as session:
        member = queue.join_gang(session, worker_id=worker[0], offered=worker[1], lease_seconds=60,
                                 address="127.0.0.1", port=port)
        if member is not None:
            queue.start_full_gang(session, member.job_id, lease_seconds=60)
            session.expunge(member)
        return member


def members(database: Database, job_id: int) -> list[tuple[int, int | None, bool]]:
    with database.read() as session:
        rows = session.execute(select(GangMember.node_rank, GangMember.worker_id, GangMember.attempt_token)
                               .where(GangMember.job_id == job_id).order_by(GangMember.node_rank))
        return [(rank, worker, token is not None) for rank, worker, token in rows]


def beat(database: Database, member: GangMember) -> queue.gangs.Membership | None:
    with database.write.begin() as session:
        return queue.beat_membership(session, member.member_token, lease_seconds=60)


def test_the_job_starts_only_when_every_node_holds_it_and_a_third_worker_never_joins(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    first, second, third = (add_worker(queue_db, name) for name in ("node-a", "node-b", "node-c"))
    assert claim(queue_db, first) is None  # a plain claim never takes a job across several workers
    one = join(queue_db, first)
    assert one is not None and one.node_rank == 0 and job_row(queue_db, job_id).status == "queued"
    assert join(queue_db, first) is None  # the same worker is never two of its nodes
    two = join(queue_db, second)
    assert two is not None and two.node_rank == 1
    job = job_row(queue_db, job_id)
    assert (job.status, job.attempts, job.worker_id) == ("running", 1, first[0])
    assert join(queue_db, third) is None
    assert members(queue_db, job_id) == [(0, first[0], True), (1, second[0], True)]
    membership = beat(queue_db, two)
    assert membership is not None and membership.attempt_token == job.lease_token


def test_a_gang_that_cannot_fill_in_time_is_dissolved_and_its_member_learns_it(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    alone = join(queue_db, add_worker(queue_db, "node-a"))
    assert alone is not None
    with queue_db.write.begin() as session:
        assert queue.dissolve_unformed_gangs(session, form_seconds=30, grace_seconds=0) == 0
        session.execute(update(GangMember).values(joined_at=db_now(-31)))  # the gang formed 31 s ago
        assert queue.dissolve_unformed_gangs(session, form_seconds=30, grace_seconds=0) == 1
    assert beat(queue_db, alone) is None and members(queue_db, job_id) == []
    assert job_row(queue_db, job_id).status == "queued"
    again = join(queue_db, add_worker(queue_db, "node-b"))
    assert again is not None and again.node_rank == 0  # node ranks start again from 0


def test_a_forming_member_that_misses_its_beat_dissolves_the_gang(queue_db: Database) -> None:
    submit(queue_db, ACROSS_TWO)
    alone = join(queue_db, add_worker(queue_db, "node-a"))
    with queue_db.write.begin() as session:
        session.execute(update(GangMember).values(expires_at=db_now(-1)))
        assert queue.dissolve_unformed_gangs(session, form_seconds=3600, grace_seconds=0) == 1
    assert alone is not None and beat(queue_db, alone) is None


def test_a_member_lost_mid_run_requeues_the_attempt_and_the_others_learn_it(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    first, second = add_worker(queue_db, "node-a"), add_worker(queue_db, "node-b")
    zero, one = join(queue_db, first), join(queue_db, second)
    assert zero is not None and one is not None
    with queue_db.write.begin() as session:
        session.execute(update(GangMember).where(GangMember.node_rank == 1).values(expires_at=db_now(-1)))
        assert queue.requeue_gangs_missing_a_member(session, grace_seconds=0) == 1
        assert queue.requeue_gangs_missing_a_member(session, grace_seconds=0) == 0
    job = job_row(queue_db, job_id)
    assert (job.status, job.attempts, job.lease_token) == ("queued", 1, None)
    assert beat(queue_db, zero) is None
    with queue_db.write.begin() as session:
        assert queue.remove_stale_members(session) == 0  # the ended attempt's members stay: its result is welcome
    assert members(queue_db, job_id) == [(0, first[0], True), (1, second[0], True)]
    again = [join(queue_db, first), join(queue_db, second)]  # the same workers form the next gang, ranks from 0
    assert [member.node_rank for member in again if member] == [0, 1]
    assert (job_row(queue_db, job_id).status, job_row(queue_db, job_id).attempts) == ("running", 2)


def test_a_failed_gang_attempt_is_requeued_while_attempts_remain_and_its_result_is_stored_once(
        queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    first, second = add_worker(queue_db, "node-a"), add_worker(queue_db, "node-b")
    for _ in range(2):
        join(queue_db, first), join(queue_db, second)
        token = job_row(queue_db, job_id).lease_token
        assert token is not None
        with queue_db.write.begin() as session:
            assert queue.fail_job(session, job_id, token, "rank 2 (cpu) died", None)
            queue.remove_stale_members(session)
        assert job_row(queue_db, job_id).status == "queued"
    join(queue_db, first), join(queue_db, second)
    token = job_row(queue_db, job_id).lease_token
    with queue_db.write.begin() as session:
        assert queue.complete_job(session, job_id, token, {"kind": "padding"})
        assert not queue.complete_job(session, job_id, token, {"kind": "padding"})
    assert (job_row(queue_db, job_id).status, job_row(queue_db, job_id).attempts) == ("succeeded", 3)


def test_members_stay_while_the_job_can_take_their_attempts_result_and_go_once_it_cannot(
        queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO)
    with queue_db.write.begin() as session:
        session.execute(update(Job).where(Job.id == job_id).values(max_attempts=1))
    join(queue_db, add_worker(queue_db, "node-a")), join(queue_db, add_worker(queue_db, "node-b"))
    token = job_row(queue_db, job_id).lease_token
    expire_lease(queue_db, job_id)
    assert reap(queue_db) == 1 and job_row(queue_db, job_id).status == "failed"  # its last lease expired...
    with queue_db.write.begin() as session:
        assert queue.remove_stale_members(session) == 0  # ...so the attempt's late result is still welcome
        assert token is not None and queue.complete_job(session, job_id, token, {"kind": "padding"})
        assert queue.remove_stale_members(session) == 2
    failing = submit(queue_db, ACROSS_TWO)
    join(queue_db, add_worker(queue_db, "node-c")), join(queue_db, add_worker(queue_db, "node-d"))
    token = job_row(queue_db, failing).lease_token
    with queue_db.write.begin() as session:
        session.execute(update(Job).where(Job.id == failing).values(max_attempts=1))
        assert token is not None and queue.fail_job(session, failing, token, "rank 3 (cpu) died", None)
        assert queue.remove_stale_members(session) == 2  # failed for good: no result can come
    assert members(queue_db, failing) == []


def test_a_member_leaving_a_forming_gang_dissolves_it(queue_db: Database) -> None:
    job_id = submit(queue_db, ACROSS_TWO | {"nodes": 3})
    zero = join(queue_db, add_worker(queue_db, "node-a"))
    one = join(queue_db, add_worker(queue_db, "node-b"))
    assert zero is not None and one is not None
    with queue_db.write.begin() as session:
        assert queue.leave_gang(session, one.member_token) == 2
    assert beat(queue_db, zero) is None and job_row(queue_db, job_id).status == "queued"


def test_one_node_jobs_are_never_joined(queue_db: Database) -> None:
    single = submit(queue_db)
    worker = add_worker(queue_db, "node-a")
    assert join(queue_db, worker) is None
    assert claim(queue_db, worker).id == single
    with queue_db.read() as session:
        assert session.scalar(select(Job.nodes).where(Job.id == single)) == 1
