"""/v1/gangs over real HTTP, on SQLite and PostgreSQL: two workers join a job across two nodes, both are told
the rendezvous (node 0's address and port) and only node 0 the lease; the result comes from whichever member
ran global rank 0 and is stored once; a worker that hands jobs to a scheduler with enough nodes claims the job
whole instead; a submit of nodes on a kind that cannot spread is refused naming it."""

from __future__ import annotations

from typing import Any

import httpx

from padbench.contract.gangs import GangJoined, GangState
from tests.integration.conftest import LiveServer, result_document
from tests.integration.test_server_jobs import CPU, claim, register, submit

ACROSS_TWO = {"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "sdpa", "nodes": 2, "gpus": 2}


def join(http: httpx.Client, worker_id: int, port: int) -> GangJoined | None:
    response = http.post("/v1/gangs", json={"worker_id": worker_id, "address": "127.0.0.1", "port": port})
    assert response.status_code in (200, 204), response.text
    return None if response.status_code == 204 else GangJoined.model_validate(response.json())


def beat(http: httpx.Client, joined: GangJoined) -> httpx.Response:
    return http.post(f"/v1/gangs/{joined.job.id}/beat", json={"member_token": joined.member_token})


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
