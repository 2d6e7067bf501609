"""Admission lanes: which lane a request takes, how many run at once, and the fast 503 when one is full."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from padbench.server.api.admission import AdmissionMiddleware, Lane, LaneLimits, Saturated, lane_of


@pytest.mark.parametrize(("method", "path", "lane"), [
    ("POST", "/v1/leases", "worker"),
    ("POST", "/v1/leases/7/heartbeat", "worker"),
    ("POST", "/v1/workers", "worker"),
    ("GET", "/v1/workers", "read"),
    ("POST", "/v1/jobs", "write"),
    ("POST", "/v1/jobs/7/cancel", "write"),
    ("GET", "/v1/jobs/7", "read"),
    ("GET", "/healthz", "health"),
    ("GET", "/livez", "health"),
    ("GET", "/metrics", "read"),
    ("GET", "/jobs/7", None),  # a dashboard page: no database work
    ("GET", "/static/dashboard.css", None),
])
def test_each_request_takes_its_lane(method: str, path: str, lane: str | None) -> None:
    assert lane_of(method, path) == lane


def test_a_lane_admits_its_capacity_then_makes_the_next_wait_and_gives_up_in_time() -> None:
    async def scenario() -> None:
        lane = Lane("read", capacity=2, max_wait_s=0.05, max_queue=10)
        await lane.admit()
        await lane.admit()
        with pytest.raises(Saturated, match=r"no place within 0\.05 s"):
            await lane.admit()
        lane.leave()
        await asyncio.wait_for(lane.admit(), timeout=1)  # the freed place goes to the next in line

    asyncio.run(scenario())


def test_a_full_line_is_refused_at_once() -> None:
    async def scenario() -> None:
        lane = Lane("write", capacity=1, max_wait_s=10, max_queue=1)
        await lane.admit()
        waiting = asyncio.create_task(lane.admit())
        await asyncio.sleep(0)
        with pytest.raises(Saturated, match="1 requests already wait"):
            await lane.admit()
        lane.leave()
        await asyncio.wait_for(waiting, timeout=1)

    asyncio.run(scenario())


class HeldApp:
    """An app whose requests stay in progress until `release` is set: a lane full of slow requests."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != "/v1/leases/1/heartbeat":
            await self.release.wait()
        await JSONResponse({"path": scope["path"]})(scope, receive, send)


def test_a_saturated_read_lane_answers_503_with_retry_after_while_workers_go_through() -> None:
    async def scenario() -> None:
        app = HeldApp()
        limits = LaneLimits(worker=1, write=1, read=2, health=1, max_wait_s=0.1, max_queue=100)
        transport = httpx.ASGITransport(app=AdmissionMiddleware(app, limits))
        async with httpx.AsyncClient(transport=transport, base_url="http://padbench.test") as http:
            pollers = [asyncio.create_task(http.get(f"/v1/jobs/{index}")) for index in range(2)]
            await asyncio.sleep(0.01)
            refused = await http.get("/v1/jobs/9")
            heartbeat = await http.post("/v1/leases/1/heartbeat")
            app.release.set()
            assert [(await task).status_code for task in pollers] == [200, 200]
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
        assert "saturated (read requests" in refused.json()["detail"]
        assert heartbeat.status_code == 200

    asyncio.run(scenario())


def test_places_go_in_arrival_order_past_waiters_that_gave_up_and_newcomers_never_barge() -> None:
    async def scenario() -> None:
        lane = Lane("read", capacity=1, max_wait_s=30, max_queue=100)
        await lane.admit()  # the one place is taken
        admitted: list[int] = []

        async def request(number: int) -> None:
            await lane.admit()
            admitted.append(number)

        waiters = {}
        for number in range(12):
            waiters[number] = asyncio.create_task(request(number))
            await asyncio.sleep(0)  # each in line before the next arrives
        for number in (2, 5, 6):  # their clients went away
            waiters[number].cancel()
        await asyncio.sleep(0)
        assert lane.waiting == 9
        for turn in range(9):
            lane.leave()  # the running request ends: its place goes to the longest waiter
            if turn == 0:  # a newcomer (a retry, say) finds the line and goes to its end
                waiters[99] = asyncio.create_task(request(99))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        assert admitted == [0, 1, 3, 4, 7, 8, 9, 10, 11]
        lane.leave()
        await asyncio.wait_for(waiters[99], timeout=1)
        assert admitted[-1] == 99 and lane.waiting == 0

    asyncio.run(scenario())


def test_a_waiter_that_times_out_as_its_turn_comes_passes_the_place_on() -> None:
    async def scenario() -> None:
        lane = Lane("write", capacity=1, max_wait_s=0.05, max_queue=10)
        await lane.admit()
        late = asyncio.create_task(lane.admit())
        await asyncio.sleep(0)
        patient = Lane("write", capacity=1, max_wait_s=30, max_queue=10)
        with pytest.raises(Saturated):
            await late  # nobody left: it gave up its place in line
        assert lane.waiting == 0
        lane.leave()
        assert lane.free == 1  # the place was not lost with the waiter that gave up
        await patient.admit()
        second = asyncio.create_task(patient.admit())
        await asyncio.sleep(0)
        patient.leave()  # handed to `second`...
        second.cancel()  # ...which is cancelled before it runs: the place must not leak
        with pytest.raises(asyncio.CancelledError):
            await second
        assert patient.free == 1 and patient.waiting == 0

    asyncio.run(scenario())
