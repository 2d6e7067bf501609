"""Heartbeat timing and what the heartbeat thread makes of the server's answers."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from padbench.contract.api import JobStatus, LeaseOut
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from padbench.worker.supervisor.lease import MAX_BEAT_INTERVAL_S, MIN_BEAT_INTERVAL_S, LeaseKeeper, beat_interval

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def lease(seconds: float, aware: bool = True) -> LeaseOut:
    expires = NOW + timedelta(seconds=seconds)
    job = {"id": 9, "kind": "padding", "status": "running", "attempts": 1, "max_attempts": 3,
           "submitter": "alice", "created_at": NOW.isoformat(), "spec": {}}
    return LeaseOut.model_validate({"job": job, "lease_token": "tok",
                                    "lease_expires_at": (expires if aware else expires.replace(tzinfo=None))})


def test_the_heartbeat_period_is_a_third_of_the_lease_within_bounds() -> None:
    assert beat_interval(lease(6), now=NOW) == 2.0
    assert beat_interval(lease(3600), now=NOW) == MAX_BEAT_INTERVAL_S
    assert beat_interval(lease(0.1), now=NOW) == MIN_BEAT_INTERVAL_S
    assert beat_interval(lease(6, aware=False), now=NOW) == 2.0  # naive timestamps are UTC


def keeper_answering(status: int, cancel: bool = False,
                     job_status: str | None = None) -> tuple[LeaseKeeper, list[dict]]:
    bodies: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if status != 200:
            refusal = {"detail": "stale lease token"} | ({"job_status": job_status} if job_status else {})
            return httpx.Response(status, json=refusal)
        return httpx.Response(200, json={"cancel_requested": cancel, "lease_expires_at": NOW.isoformat()})

    api = WorkerApi("http://padbench.test", "w", transport=httpx.MockTransport(handler))
    return LeaseKeeper(api, lease(60), interval_s=60), bodies


def test_a_beat_carries_the_latest_progress_and_the_token_in_the_body() -> None:
    keeper, bodies = keeper_answering(200)
    keeper.update(1.7, "x" * 5000)
    keeper.beat()
    assert bodies == [{"lease_token": "tok", "progress": 1.0, "message": "x" * 2000}]
    assert keeper.beats == 1 and not keeper.cancel_requested.is_set()


def test_a_cancel_answer_sets_the_cancel_flag() -> None:
    keeper, _ = keeper_answering(200, cancel=True)
    keeper.beat()
    assert keeper.cancel_requested.is_set()


def test_a_409_for_an_ended_job_means_lost_and_a_5xx_is_transient() -> None:
    lost, _ = keeper_answering(409, job_status="succeeded")
    lost.beat()
    assert lost.lost.is_set()
    unsaid, _ = keeper_answering(409)  # a server that does not say the job's status: as before, lost
    unsaid.beat()
    assert unsaid.lost.is_set()
    flaky, _ = keeper_answering(503)
    flaky.beat()
    assert not flaky.lost.is_set() and flaky.beats == 0


def test_a_409_for_a_job_another_lease_holds_is_a_lost_lease_too() -> None:
    """The lease was missed past the server's grace and the job went to another worker: this run stops."""
    keeper, bodies = keeper_answering(409, job_status="running")
    keeper.beat()
    assert keeper.lost.is_set()
    keeper.update(0.5, "progress")
    keeper.beat()
    assert len(bodies) == 1  # asked once; the thread's loop ends on the flag too


def test_lease_lost_carries_the_status_the_server_sent() -> None:
    api = WorkerApi("http://padbench.test", "w", transport=httpx.MockTransport(lambda request: httpx.Response(
        409, json={"detail": "lease_token: not the current lease", "job_status": "queued"})))
    with pytest.raises(LeaseLost, match="HTTP 409: lease_token: not the current lease") as raised:
        api.release(9, "tok")
    assert raised.value.job_status is JobStatus.queued and not raised.value.job_ended
    assert raised.value.status == 409


def test_progress_wakes_the_thread_for_a_prompt_beat() -> None:
    keeper, bodies = keeper_answering(200)
    with keeper:
        keeper.update(0.25, "quarter")
        deadline = time.monotonic() + 5
        while not bodies and time.monotonic() < deadline:
            time.sleep(0.02)
    assert bodies and bodies[0]["progress"] == 0.25
