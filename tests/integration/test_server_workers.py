"""Workers' last contact over real HTTP, on SQLite and PostgreSQL: registration, every claim (also one that
finds no job) and every heartbeat set it by the database clock; `GET /v1/workers` shows it with the job each
worker runs now, and `/metrics` counts an idle worker that polls as alive. Time is faked in SQL.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import update

from padbench.contract.api import WorkerOut
from padbench.server.db.clock import db_now
from padbench.server.db.models import Worker
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import claim, register, submit
from tests.integration.test_server_metrics import scrape, value

LONG_AGO_S = 3600


def silent_since(server: LiveServer, seconds: float) -> None:
    """Fake time in SQL: every worker registered and was last heard from `seconds` ago."""
    with server.database.write.begin() as session:
        session.execute(update(Worker).values(registered_at=db_now(-seconds), last_contact_at=db_now(-seconds)))


def the_worker(http: httpx.Client) -> WorkerOut:
    response = http.get("/v1/workers")
    assert response.status_code == 200, response.text
    [worker] = [WorkerOut.model_validate(item) for item in response.json()]
    return worker


def heard_from_just_now(worker: WorkerOut) -> bool:
    assert worker.last_contact_at is not None
    return worker.last_contact_at - worker.registered_at > timedelta(seconds=LONG_AGO_S - 60)


def test_claims_and_heartbeats_refresh_last_contact_and_the_list_shows_the_running_job(
        any_live_server: LiveServer) -> None:
    with any_live_server.client("worker") as gpu, any_live_server.client("viewer") as viewer, \
            any_live_server.client("submitter") as alice:
        worker_id = register(gpu, "box-1")
        registered = the_worker(viewer)
        assert registered.last_contact_at is not None and registered.running_job_id is None
        silent_since(any_live_server, LONG_AGO_S)
        assert claim(gpu, worker_id) is None  # nothing queued: still a sign of life
        assert heard_from_just_now(the_worker(viewer))
        job_id = submit(alice)
        lease = claim(gpu, worker_id)
        assert lease is not None and the_worker(viewer).running_job_id == job_id
        silent_since(any_live_server, LONG_AGO_S)
        beat = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": lease.lease_token})
        assert beat.status_code == 200
        assert heard_from_just_now(the_worker(viewer))


def test_admins_and_viewers_list_workers_others_may_not(live_server: LiveServer) -> None:
    with live_server.client("worker") as gpu:
        register(gpu, "box-1")
    for who, expected in (("admin", 200), ("viewer", 200), ("submitter", 403), ("worker", 403)):
        with live_server.client(who) as http:
            assert http.get("/v1/workers").status_code == expected, who


def test_an_idle_worker_that_polls_counts_as_alive_in_metrics(any_live_server: LiveServer) -> None:
    with any_live_server.client("worker") as gpu:
        worker_id = register(gpu, "idle-box")
        silent_since(any_live_server, LONG_AGO_S)
        assert value(scrape(any_live_server), "padbench_worker_last_seen_age_seconds", worker="idle-box") >= LONG_AGO_S
        assert claim(gpu, worker_id) is None
    assert value(scrape(any_live_server), "padbench_worker_last_seen_age_seconds", worker="idle-box") < 60
