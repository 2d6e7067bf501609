"""`/healthz` and `/livez` answer promptly while pollers saturate a real `padbench server` process.

The server runs with one place in its read lane and many more pollers than that, back to back: every
poll waits in the read lane's line, behind all the others (its median wait is the line's length times a
poll's time). Health checks have their own lane, so they wait for nothing but their own work: their p99
stays within 100 ms, whatever the line. The gap is structural (a line of ~100 against no line), so the
bound is far from both sides even on a busy machine.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.acceptance.conftest import LiveServer, running_server
from tests.integration.conftest import empty_postgres, postgres_database  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow
POLLERS = 100
HEALTH_SAMPLES = 60  # of each of /healthz and /livez
HEALTH_P99_S = 0.1
SMALL_LANES = {"PADBENCH_LANE_READ": "1", "PADBENCH_LANE_WRITE": "1", "PADBENCH_LANE_WORKER": "1",
               "PADBENCH_LANE_HEALTH": "2", "PADBENCH_LANE_MAX_WAIT_SECONDS": "120",
               "PADBENCH_LANE_MAX_QUEUE": "10000"}


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    env = dict(SMALL_LANES)
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_database")
        empty_postgres(url)
        env["PADBENCH_DATABASE_URL"] = url
    with running_server(tmp_path, env) as live:
        yield live


async def poll_until(server: LiveServer, stop: threading.Event, waits: list[float]) -> None:
    headers = {"Authorization": f"Bearer {server.tokens.admin}"}
    limits = httpx.Limits(max_connections=POLLERS * 2)
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120, limits=limits) as http:

        async def poller() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                response = await http.get("/v1/jobs")
                assert response.status_code == 200, response.text
                waits.append(time.perf_counter() - started)

        await asyncio.gather(*(poller() for _ in range(POLLERS)))


def sample_health(server: LiveServer) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {"/healthz": [], "/livez": []}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for _ in range(HEALTH_SAMPLES):
            for path, taken in seconds.items():
                started = time.perf_counter()
                response = http.get(path)
                taken.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
            time.sleep(0.05)
    return seconds


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def test_health_checks_stay_fast_while_pollers_saturate_the_read_lane(server: LiveServer) -> None:
    stop, poll_waits = threading.Event(), []
    pollers = threading.Thread(target=lambda: asyncio.run(poll_until(server, stop, poll_waits)))
    pollers.start()
    try:
        while len(poll_waits) < POLLERS:  # every poller has been answered once: the line is formed
            assert pollers.is_alive(), "the pollers stopped"
            time.sleep(0.1)
        health = sample_health(server)
    finally:
        stop.set()
        pollers.join(timeout=180)
    poll_median = statistics.median(poll_waits)
    for path, taken in health.items():
        assert p99(taken) <= HEALTH_P99_S, f"{path}: p99 {p99(taken):.3f} s, the pollers' median {poll_median:.3f} s"
    assert poll_median > HEALTH_P99_S, f"the pollers were not held in line (median {poll_median:.3f} s)"
