"""A job's `worker_labels` over real HTTP on loopback: the server leases it only to a worker carrying every one
of those labels (in any case), `GET /v1/workers` shows each worker's labels, and a queued job that no live
worker could take says why in the job API and `padbench status`."""

from __future__ import annotations

from typing import Any

from padbench.client.display import format_status, format_workers
from padbench.contract.api import Capabilities, JobOut, WorkerOut
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import CPU, SPEC, claim, register, submit


def labelled(*labels: str) -> dict[str, Any]:
    return CPU | {"labels": list(labels)}


ON_NVLINK: dict[str, Any] = SPEC | {"worker_labels": ["NVLink", "team-a"], "name": "on-nvlink"}


def test_a_labelled_job_waits_for_a_worker_carrying_every_label_and_goes_to_it(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        job_id = submit(alice, ON_NVLINK)
        plain, half = register(fleet, "plain-box", CPU), register(fleet, "team-box", labelled("team-a"))
        assert claim(fleet, plain) is None and claim(fleet, half) is None
        job = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert job.status.value == "queued" and job.spec["worker_labels"] == ["nvlink", "team-a"]
        assert job.waiting_reason == "needs a worker labelled 'nvlink' and 'team-a'; no live worker carries them all"
        status = format_status(job)
        assert "needs      a worker labelled nvlink, team-a" in status and "waits      needs a worker" in status
        full = register(fleet, "nvlink-box", labelled("team-a", "NVLINK", "rack-3"))
        again = JobOut.model_validate(alice.get(f"/v1/jobs/{job_id}").json())
        assert again.waiting_reason is None  # a live worker carries them now; it only has to ask
        lease = claim(fleet, full)
        assert lease is not None and lease.job.id == job_id and lease.job.worker == "nvlink-box"


def test_unlabelled_jobs_still_go_to_labelled_workers(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as fleet:
        targeted, anywhere = submit(alice, ON_NVLINK), submit(alice, SPEC)
        lease = claim(fleet, register(fleet, "team-box", labelled("team-a")))
        assert lease is not None and lease.job.id == anywhere != targeted


def test_the_workers_list_shows_each_workers_labels(live_server: LiveServer) -> None:
    with live_server.client("worker") as fleet, live_server.client("admin") as admin:
        register(fleet, "nvlink-box", labelled("nvlink", "team-a"))
        register(fleet, "plain-box", CPU)
        workers = {worker.name: worker for worker in
                   (WorkerOut.model_validate(item) for item in admin.get("/v1/workers").json())}
        assert workers["nvlink-box"].capabilities.labels == ["nvlink", "team-a"]
        assert workers["plain-box"].capabilities == Capabilities.model_validate(CPU)
        lines = format_workers(list(workers.values()), workers["plain-box"].registered_at).splitlines()
        assert "LABELS" in lines[0] and "nvlink, team-a" in lines[1]


def test_a_bad_label_is_a_422_naming_the_field_and_the_rule(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice, live_server.client("worker") as fleet:
        for labels in (["-leading-dash"], ["has space"], ["x" * 65], ["a"] * 17):
            response = alice.post("/v1/jobs", json={"spec": SPEC | {"worker_labels": labels}})
            assert response.status_code == 422, response.text
            assert any(item["loc"][:2] == ["spec", "worker_labels"] for item in response.json()["detail"])
        refused = fleet.post("/v1/workers", json={"name": "bad", "capabilities": labelled("team/a")})
        assert refused.status_code == 422
        assert "a label is letters, digits" in refused.text
