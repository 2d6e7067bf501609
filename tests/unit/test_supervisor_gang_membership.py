"""A gang membership's beats: they carry the job's progress from the node that runs global rank 0 (torch numbers
the nodes itself, so that may be any member), beat soon after it changes but no sooner than a lease's heartbeat
would, and a 409 ends the membership."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx

from padbench.contract.bounds import MAX_MESSAGE_LENGTH
from padbench.contract.gangs import GangJoined
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.gang import MembershipKeeper
from padbench.worker.supervisor.lease import MIN_PROGRESS_GAP_S, LatestProgress, wait_for_beat


def state(expires_in_s: float) -> dict[str, Any]:
    """A formed gang's state for node 1 of 2, as a beat answers it."""
    expires = datetime.now(timezone.utc) + timedelta(seconds=expires_in_s)
    return {"job_id": 9, "node_rank": 1, "nodes": 2, "members": [{"node_rank": 0, "worker": "node-a"},
                                                                 {"node_rank": 1, "worker": "node-b"}],
            "member_expires_at": expires.isoformat(),
            "rendezvous": {"endpoint": "10.0.0.5:29400", "run_id": "padbench-job9-abc", "nodes": 2, "node_rank": 1}}


def keeper_answering(status: int, expires_in_s: float = 3600) -> tuple[MembershipKeeper, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/gangs/9/beat"
        bodies.append(json.loads(request.content))
        if status != 200:
            return httpx.Response(status, json={"detail": "member_token: the attempt ended", "job_status": "queued"})
        return httpx.Response(200, json=state(expires_in_s))

    api = WorkerApi("http://padbench.test", "w", transport=httpx.MockTransport(handler))
    job = {"id": 9, "kind": "padding", "status": "running", "attempts": 1, "max_attempts": 3,
           "submitter": "alice", "created_at": datetime.now(timezone.utc).isoformat(), "spec": {}}
    joined = GangJoined.model_validate({"member_token": "member", "job": job, "state": state(expires_in_s)})
    return MembershipKeeper(api, joined), bodies


def test_a_beat_carries_the_latest_progress_bounded_as_a_heartbeats() -> None:
    keeper, bodies = keeper_answering(200)
    keeper.beat()  # no progress yet: the beat carries none, and the server keeps what the job shows
    keeper.update(0.25, "step 1")
    keeper.update(1.7, "x\x00" * 5000)
    keeper.beat()
    assert bodies[0] == {"member_token": "member", "progress": None, "message": None}
    assert bodies[1]["progress"] == 1.0 and len(bodies[1]["message"]) == MAX_MESSAGE_LENGTH
    assert "\x00" not in bodies[1]["message"]  # PostgreSQL stores no NUL: shown as U+FFFD
    assert keeper.formed.is_set() and not keeper.lost.is_set()


def test_progress_wakes_the_membership_for_a_prompt_beat() -> None:
    keeper, bodies = keeper_answering(200)  # a long membership: unprompted, the next beat is 10 s away
    with keeper:
        keeper.update(0.5, "half")
        deadline = time.monotonic() + 5
        while not bodies and time.monotonic() < deadline:
            time.sleep(0.02)
    assert bodies and (bodies[0]["progress"], bodies[0]["message"]) == (0.5, "half")


def test_a_beat_for_progress_waits_the_gap_a_lease_heartbeat_keeps() -> None:
    progress, done = LatestProgress(), threading.Event()
    progress.update(0.1, "early")
    last_beat = time.monotonic()
    assert wait_for_beat(progress, done, last_beat, interval_s=60)
    assert MIN_PROGRESS_GAP_S * 0.99 <= time.monotonic() - last_beat < 30
    assert not progress.wake.is_set()
    done.set()
    progress.wake.set()
    assert not wait_for_beat(progress, done, time.monotonic(), interval_s=60)


def test_a_409_ends_the_membership_and_its_beats() -> None:
    keeper, bodies = keeper_answering(409)
    keeper.update(0.5, "half")
    with keeper:
        assert keeper.lost.wait(timeout=5)
    assert len(bodies) == 1 and bodies[0]["progress"] == 0.5
