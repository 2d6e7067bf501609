"""/v1/gangs over real HTTP, on SQLite and PostgreSQL: two workers join a job across two nodes, both are told
the rendezvous (node 0's address and port) and only node 0 the lease; the result comes from whichever member
ran global rank 0 and is stored once; a worker that hands jobs to a scheduler with enough nodes claims the job
whole instead; a submit of nodes on a kind that cannot spread is refused naming it; a gang attempt whose lease
was reaped keeps its members, whose late result is stored once, as a late one-node result is (time faked in
SQL); a member that is not node 0 carries the job's progress on its beat while its attempt runs, and every
member of a running gang shows busy with the job in the workers listing."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import func, select

from padbench.contract.api import WorkerOut
from padbench.contract.gangs import GangJoined, GangState
from padbench.server.db.models import GangMember, JobResult
from tests.integration.conftest import LiveServer, expire_lease, reap, result_document
from tests.integration.test_server_jobs import CPU, claim, register, submit

ACROSS_TWO = {"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "sdpa", "nodes": 2, "gpus": 2}


def join(http: httpx.Client, worker_id: int, port: int) -> GangJoined | None:
    response = http.post("/v1/gangs", json={"worker_id": worker_id, "address": "127.0.0.1", "port": port})
    assert response.status_code in (200, 204), response.text
    return None if response.status_code == 204 else GangJoined.model_validate(response.json())


def beat(http: httpx.Client, joined: GangJoined, **progress: Any) -> httpx.Response:
    return http.post(f"/v1/gangs/{joined.job.id}/beat", json={"member_token": joined.member_token, **progress})


def busy_with(http: httpx.Client) -> dict[str, list[int]]:
    """Each worker's running jobs, as `GET /v1/workers` lists them."""
    response = http.get("/v1/workers")
    assert response.status_code == 200, response.text
    workers = [WorkerOut.model_validate(item) for item in response.json()]
    return {worker.name: worker.running_job_ids for worker in workers}


def test_two_workers_form_a_gang_and_the_result_is_stored_once(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as box:
        job_id = submit(user, ACROSS_TWO)
        workers = [register(box, name) for name in ("node-a", "node-b", "node-c")]
        assert box.post("/v1/leases", json={"worker_id": workers[0]}).status_code == 204
        first = join(box, workers[0], 29400)
        assert first is not None and first.state.rendezvous is None and first.state.node_rank == 0
        assert GangState.model_validate(beat(box, first).json()).rendezvous is None  # still forming
        second = join(box, workers[1], 29401)
        assert second is not None and second.state.node_rank == 1
        assert join(box, workers[2], 29402) is None  # the gang is full
        zero, one = (GangState.model_validate(beat(box, member).json()) for member in (first, second))
        assert zero.rendezvous is not None and one.rendezvous is not None
        assert zero.rendezvous.endpoint == one.rendezvous.endpoint == "127.0.0.1:29400"
        assert zero.rendezvous.run_id == one.rendezvous.run_id and zero.rendezvous.nodes == 2
        assert zero.lease is not None and one.lease is None  # node 0 holds the job's lease
        assert [node.worker for node in one.members] == ["node-a", "node-b"]
        assert user.get(f"/v1/jobs/{job_id}").json()["status"] == "running"
        report: dict[str, Any] = {"member_token": second.member_token, "result": result_document(ACROSS_TWO)}
        assert box.post(f"/v1/gangs/{job_id}/complete", json=report).status_code == 204
        # Another member of the same attempt reporting too is taken as a retry of the report that won: nothing
        # more is stored.
        again = report | {"member_token": first.member_token}
        assert box.post(f"/v1/gangs/{job_id}/complete", json=again).status_code == 204
        assert user.get(f"/v1/jobs/{job_id}/results").status_code == 200
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["status"], job["attempts"]) == ("succeeded", 1)
        lost = beat(box, first)
        assert lost.status_code == 409 and lost.json()["job_status"] == "succeeded"


def lease_token(http: httpx.Client, node_zero: GangJoined) -> str:
    """The attempt's lease, as node 0's beat hands it over."""
    lease = GangState.model_validate(beat(http, node_zero).json()).lease
    assert lease is not None
    return lease.lease_token


def test_a_reaped_gang_attempts_late_result_is_stored_once_and_ends_the_forming_gang(
        any_live_server: LiveServer) -> None:
    database = any_live_server.database
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as box:
        job_id = submit(user, ACROSS_TWO)
        a, b, c = (register(box, name) for name in ("node-a", "node-b", "node-c"))
        first = [join(box, a, 29400), join(box, b, 29401)]
        assert first[0] is not None and first[1] is not None
        first_token = lease_token(box, first[0])
        # The server was unreachable past the lease's deadline: the attempt is reaped and a second gang (one of
        # the first attempt's workers in it again) runs the job, until its own lease is reaped too.
        expire_lease(database, job_id)
        assert reap(database) == 1
        second = [join(box, c, 29402), join(box, a, 29403)]
        assert second[0] is not None and second[1] is not None
        assert [member.state.node_rank for member in second] == [0, 1]
        second_token = lease_token(box, second[0])
        expire_lease(database, job_id)
        assert reap(database) == 1
        forming = join(box, b, 29404)
        assert forming is not None and forming.state.node_rank == 0  # a third gang forms from node rank 0
        with database.read() as session:  # both ended attempts' members stay
            assert session.scalar(select(func.count()).select_from(GangMember)) == 5
        assert beat(box, first[1]).status_code == 409  # an ended attempt's member beats no more...
        # ...but the first attempt's member whose node ran global rank 0 still reports its result.
        report: dict[str, Any] = {"member_token": first[1].member_token, "result": result_document(ACROSS_TWO)}
        assert box.post(f"/v1/gangs/{job_id}/complete", json=report).status_code == 204
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["status"], job["attempts"], job["worker"]) == ("succeeded", 2, "node-a")
        # The same attempt's report again is a retry of the winner; the second attempt's comes too late.
        assert box.post(f"/v1/gangs/{job_id}/complete", json=report).status_code == 204
        late = box.post(f"/v1/gangs/{job_id}/complete", json=report | {"member_token": second[0].member_token})
        assert late.status_code == 409 and late.json()["job_status"] == "succeeded"
        with database.read() as session:
            assert session.scalars(select(JobResult.lease_token).where(JobResult.job_id == job_id)).all() == [
                first_token]
        assert first_token != second_token
        stale = beat(box, forming)  # the forming gang learns the job went on without it
        assert stale.status_code == 409 and stale.json()["job_status"] == "succeeded"
        assert join(box, c, 29405) is None  # a join reaps first (as the background reaper does)...
        with database.read() as session:  # ...and the job takes no result any more: every member is gone
            assert session.scalar(select(func.count()).select_from(GangMember)) == 0


def test_a_worker_leaving_a_forming_gang_frees_the_job(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as box:
        job_id = submit(user, ACROSS_TWO)
        alone = join(box, register(box, "node-a"), 29400)
        assert alone is not None
        assert box.post(f"/v1/gangs/{job_id}/leave", json={"member_token": alone.member_token}).status_code == 204
        assert beat(box, alone).status_code == 409
        assert user.get(f"/v1/jobs/{job_id}").json()["status"] == "queued"


def test_nodes_on_a_kind_that_cannot_spread_is_refused_naming_the_field(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {"kind": "attention", "nodes": 2}})
        assert response.status_code == 422
        assert "nodes: attention jobs run on one worker" in response.text
        response = user.post("/v1/jobs", json={"spec": ACROSS_TWO | {"gpus": "all"}})
        assert response.status_code == 422 and "nodes: a job across several workers names its GPUs" in response.text
        assert user.post("/v1/jobs", json={"spec": ACROSS_TWO | {"nodes": 65}}).status_code == 422


def test_a_scheduler_worker_with_enough_nodes_claims_the_job_whole_and_reports_it(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as box:
        job_id = submit(user, ACROSS_TWO)
        one_node = register(box, "slurm-small", CPU | {"max_nodes": 1})
        assert claim(box, one_node) is None
        bad = box.post("/v1/workers", json={"name": "slurm-huge", "capabilities": CPU | {"max_nodes": 65}})
        assert bad.status_code == 422 and "max_nodes" in bad.text
        lease = claim(box, register(box, "slurm-two", CPU | {"max_nodes": 2}))
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "slurm-two"
        assert join(box, one_node, 29400) is None  # no gang forms for a job that runs
        report = {"lease_token": lease.lease_token, "result": result_document(ACROSS_TWO)}
        assert box.post(f"/v1/leases/{job_id}/complete", json=report).status_code == 204
        assert user.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"


def test_a_member_that_is_not_node_zero_carries_the_progress_and_every_member_shows_busy(
        any_live_server: LiveServer) -> None:
    with (any_live_server.client("submitter") as user, any_live_server.client("worker") as box,
          any_live_server.client("viewer") as viewer):
        job_id = submit(user, ACROSS_TWO)
        a, b, _idle = (register(box, name) for name in ("node-a", "node-b", "node-c"))
        zero, one = join(box, a, 29400), join(box, b, 29401)
        assert zero is not None and one is not None
        token = lease_token(box, zero)
        # torch put global rank 0 on node 1: its beat carries the job's progress.
        assert beat(box, one, progress=0.4, message="step 4 of 10").status_code == 200
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["progress"], job["progress_message"]) == (0.4, "step 4 of 10")
        # Node 0's lease heartbeat and membership beat, without progress of their own, leave it as it is.
        assert box.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": token}).status_code == 200
        assert beat(box, zero).status_code == 200
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["progress"], job["progress_message"], job["worker"]) == (0.4, "step 4 of 10", "node-a")
        assert beat(box, one, progress=1.5).status_code == 422  # bounded as a lease heartbeat's progress
        # Both members run the job (node 0 counted once, as the lease's holder and a member); node-c is idle.
        assert busy_with(viewer) == {"node-a": [job_id], "node-b": [job_id], "node-c": []}


def test_a_member_of_an_ended_attempt_sets_no_progress_and_is_not_busy(any_live_server: LiveServer) -> None:
    database = any_live_server.database
    with (any_live_server.client("submitter") as user, any_live_server.client("worker") as box,
          any_live_server.client("viewer") as viewer):
        job_id = submit(user, ACROSS_TWO)
        a, b, c = (register(box, name) for name in ("node-a", "node-b", "node-c"))
        first = [join(box, a, 29400), join(box, b, 29401)]
        assert first[0] is not None and first[1] is not None
        assert beat(box, first[1], progress=0.3, message="first attempt").status_code == 200
        expire_lease(database, job_id)
        assert reap(database) == 1  # the first attempt is requeued; its members stay, as its result may come
        refused = beat(box, first[1], progress=0.9, message="too late")
        assert refused.status_code == 409 and refused.json()["job_status"] == "queued"
        assert user.get(f"/v1/jobs/{job_id}").json()["progress_message"] == "first attempt"
        second = [join(box, c, 29402), join(box, a, 29403)]
        assert second[0] is not None and second[1] is not None
        job = user.get(f"/v1/jobs/{job_id}").json()  # a new attempt starts with no progress
        assert (job["status"], job["progress"], job["progress_message"]) == ("running", None, None)
        assert beat(box, first[1], progress=0.9, message="too late").status_code == 409
        assert user.get(f"/v1/jobs/{job_id}").json()["progress"] is None
        assert busy_with(viewer) == {"node-a": [job_id], "node-b": [], "node-c": [job_id]}
