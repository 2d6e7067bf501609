"""`/healthz` and `/livez` answer promptly while pollers saturate a real `padbench server` process.

The server runs with one place in its read lane and many more pollers than that, back to back: every
poll waits in the read lane's line, behind all the others (its median wait is the line's length times a
poll's time). Health checks have their own lane, so they wait for nothing but their own work: their p99
stays within 100 ms, whatever the line. The gap is structural (a line of ~100 against no line).

The pollers run in a process of their own: sharing the sampler's interpreter, they would hold its GIL for
up to a switch interval (5 ms) at each of a request's steps, and the sampler would time its own waits. Each
path is sampled 200 times, so its p99 is not simply its slowest sample: a two-core host running PostgreSQL,
the server and the pollers now and then deschedules one process for most of a second (seen once in a CI run:
one `/livez` of 0.8 s among 60 fast ones), while a health check that waited in the line would be slow on
every sample.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx
import pytest

from padbench.client.demo import free_loopback_port
from tests.acceptance.conftest import LiveServer, running_server
from tests.integration.conftest import empty_postgres, postgres_database  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.serial]
POLLERS = 100
HEALTH_SAMPLES = 200  # of each of /healthz and /livez
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


def poll_until(url: str, token: str, stop: Event, answered: Synchronized, median: Synchronized) -> None:
    """The pollers' process: POLLERS clients polling `/v1/jobs` back to back until `stop` is set."""
    waits: list[float] = []

    async def poll_all() -> None:
        limits = httpx.Limits(max_connections=POLLERS * 2)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as http:

            async def poller() -> None:
                while not stop.is_set():
                    started = time.perf_counter()
                    response = await http.get("/v1/jobs")
                    response.raise_for_status()
                    waits.append(time.perf_counter() - started)
                    answered.value = len(waits)

            await asyncio.gather(*(poller() for _ in range(POLLERS)))

    asyncio.run(poll_all())
    median.value = statistics.median(waits)


def sample_health(url: str) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {"/healthz": [], "/livez": []}
    with httpx.Client(base_url=url, timeout=30) as http:
        for _ in range(HEALTH_SAMPLES):
            for path, taken in seconds.items():
                started = time.perf_counter()
                response = http.get(path)
                taken.append(time.perf_counter() - started)
                assert response.status_code == 200, response.text
            time.sleep(0.02)
    return seconds


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def test_health_checks_stay_fast_while_pollers_saturate_the_read_lane(server: LiveServer) -> None:
    check_health_under_pollers(server, server.url)


def test_the_health_process_answers_fast_while_pollers_saturate_the_api(tmp_path: Path) -> None:
    """`--health-port`: the probes go to a process of their own, which no poller's thread delays."""
    health_port = free_loopback_port()
    with running_server(tmp_path, SMALL_LANES | {"PADBENCH_HEALTH_PORT": str(health_port)}) as server:
        check_health_under_pollers(server, f"http://127.0.0.1:{health_port}")


def check_health_under_pollers(server: LiveServer, health_url: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    stop, answered, median = spawn.Event(), spawn.Value("i", 0), spawn.Value("d", 0.0)
    pollers = spawn.Process(target=poll_until, args=(server.url, server.tokens.admin, stop, answered, median))
    pollers.start()
    try:
        while answered.value < POLLERS:  # every poller has been answered once: the line is formed
            assert pollers.is_alive(), "the pollers stopped"
            time.sleep(0.1)
        health = sample_health(health_url)
    finally:
        stop.set()
        pollers.join(timeout=180)
    assert pollers.exitcode == 0, "the pollers failed"
    for path, taken in health.items():
        slowest = ", ".join(f"{seconds:.3f}" for seconds in sorted(taken)[-5:])
        assert p99(taken) <= HEALTH_P99_S, (f"{path}: p99 {p99(taken):.3f} s (slowest {slowest} s), "
                                            f"the pollers' median {median.value:.3f} s")
    assert median.value > HEALTH_P99_S, f"the pollers were not held in line (median {median.value:.3f} s)"
