"""Admission lanes: how many requests of each class run at once, and how long one may wait for a place.

Four lanes, each with its own capacity, so no class of traffic can queue behind another:
- `worker`: registrations, claims, heartbeats and reports. A worker whose heartbeat waits behind a crowd
  of pollers loses its lease, and with it a GPU run; this lane is never shared with anyone else.
- `write`: the other state changes (submits, cancels, prunes).
- `read`: everything else that reads the database (job pages, results, metrics).
- `health`: `/healthz` and `/livez`. A load balancer or an orchestrator gives its probe a second or so; one
  that waited behind a crowd of pollers would mark the server dead exactly when it is busiest.
The capacities add up to less than the worker threads and the database connections the server has (see
`padbench.server.main`), so an admitted request never waits for a thread or a connection: requests cannot
wait on each other in a cycle. A request that finds its lane full waits in line (asynchronously, holding
nothing, served in arrival order); when it has waited `max_wait_s`, or the line is already `max_queue`
long, the server is truly saturated and it answers 503 with `Retry-After` at once, rather than letting
every client time out.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, deque
from dataclasses import dataclass
from typing import Literal

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from padbench.contract.api import API_PREFIX

log = logging.getLogger("padbench.server.admission")
LaneName = Literal["worker", "write", "read", "health"]
LANES: tuple[LaneName, ...] = ("worker", "write", "read", "health")
WORKER_PATHS = (f"{API_PREFIX}/leases", f"{API_PREFIX}/workers")
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Paths that touch the database; the dashboard's pages and static files do not, and pass straight through.
DATABASE_PATHS = (f"{API_PREFIX}/", "/metrics")
HEALTH_PATHS = frozenset({"/healthz", "/livez"})
HTTP_SERVICE_UNAVAILABLE = 503


@dataclass(frozen=True)
class LaneLimits:
    worker: int
    write: int
    read: int
    health: int
    max_wait_s: float
    max_queue: int

    @property
    def total(self) -> int:
        return self.worker + self.write + self.read + self.health


class Lane:
    """A capacity and a line: `admit()` returns once a place is free, or raises `Saturated`.

    The line is strictly first come, first served: a place that frees up goes straight to the request that
    has waited longest, and a newcomer (a client's retry included) never takes a place while anyone waits.
    asyncio.Semaphore does not promise that: a task woken to take a place can lose it to one that arrived
    later and found the count above zero, so a few unlucky requests wait far longer than the rest.
    """

    def __init__(self, name: LaneName, capacity: int, max_wait_s: float, max_queue: int) -> None:
        self.name = name
        self.capacity = capacity
        self.max_wait_s = max_wait_s
        self.max_queue = max_queue
        self.free = capacity
        self._line: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._line)

    async def admit(self) -> None:
        if self.free > 0 and not self._line:
            self.free -= 1
            return
        if len(self._line) >= self.max_queue:
            raise Saturated(self.name, f"{len(self._line)} requests already wait")
        place: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(place)
        # asyncio.wait, not wait_for: it neither cancels the place on a timeout nor swallows our own
        # cancellation when the place was handed over in the same instant, so both cases are seen here.
        try:
            handed, _ = await asyncio.wait({place}, timeout=self.max_wait_s)
        except BaseException:  # the client went away
            self._give_up(place)
            raise
        if not handed:
            self._give_up(place)
            raise Saturated(self.name, f"no place within {self.max_wait_s:g} s")

    def _give_up(self, place: asyncio.Future[None]) -> None:
        if place.done():
            self.leave()  # the place was handed over as we gave up: pass it on to the next in line
        else:
            self._line.remove(place)
            place.cancel()

    def leave(self) -> None:
        """Hand the place to the longest waiter, or free it when nobody waits."""
        while self._line:
            place = self._line.popleft()
            if not place.done():
                place.set_result(None)
                return
        self.free += 1


class Saturated(Exception):
    def __init__(self, lane: LaneName, why: str) -> None:
        super().__init__(f"the server is saturated ({lane} requests: {why}); retry shortly")
        self.lane = lane


def lane_of(method: str, path: str) -> LaneName | None:
    """Which lane a request belongs to; None for requests that never touch the database."""
    if path in HEALTH_PATHS:
        return "health"
    if not path.startswith(DATABASE_PATHS):
        return None
    if path.startswith(WORKER_PATHS) and method not in READ_METHODS:
        return "worker"
    return "read" if method in READ_METHODS else "write"


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, limits: LaneLimits) -> None:
        self.app = app
        self.limits = limits
        self.lanes = {name: Lane(name, getattr(limits, name), limits.max_wait_s, limits.max_queue)
                      for name in LANES}
        self.shed: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = lane_of(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if name is None:
            await self.app(scope, receive, send)
            return
        lane = self.lanes[name]
        try:
            await lane.admit()
        except Saturated as saturated:
            self.shed[name] += 1
            log.warning("%s %s: %s", scope["method"], scope["path"], saturated)
            retry_after = str(max(1, math.ceil(self.limits.max_wait_s / 4)))
            response = JSONResponse({"detail": str(saturated)}, HTTP_SERVICE_UNAVAILABLE,
                                    headers={"Retry-After": retry_after})
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            lane.leave()
