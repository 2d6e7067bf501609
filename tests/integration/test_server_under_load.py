"""A team's load on one server while a worker holds a job: 200 pollers and 50 submits at once, over HTTP.

What must hold (on SQLite and PostgreSQL): no 5xx, no request slower than a few seconds, every
acknowledged submit stored exactly once and nothing stored that was not acknowledged, and the held job
finishing on its first attempt with its result kept. Before the data layer ended each request's database
work in its own thread, this load stopped the server until the pool's 30 s timeout.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from dataclasses import dataclass, field

import httpx
import pytest
from sqlalchemy import select

from padbench.server.db.models import Job
from tests.integration.conftest import LiveServer, result_document

POLLERS = 200
SUBMITS = 50
POLLS_EACH = 2
# "A few seconds": the whole burst shares this process with the server (one GIL), so allow some headroom.
SLOWEST_ACCEPTABLE_S = 10.0
SPEC = {"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "sdpa"}
CPU = {"device": "cpu", "kernels": ["sdpa"], "job_kinds": ["padding"]}
# One TLS context for every client (unused on http://): building 250 of them blocks the event loop for
# seconds, long enough for the server to close idle keep-alive connections under the clients' feet.
TLS = ssl.create_default_context()


@dataclass
class Observed:
    statuses: list[int] = field(default_factory=list)
    slowest_s: float = 0.0
    acknowledged: dict[str, int] = field(default_factory=dict)  # spec name → job id

    async def send(self, http: httpx.AsyncClient, method: str, url: str, **kwargs: object) -> httpx.Response:
        started = time.perf_counter()
        response = await http.request(method, url, **kwargs)  # type: ignore[arg-type]
        self.slowest_s = max(self.slowest_s, time.perf_counter() - started)
        self.statuses.append(response.status_code)
        return response


def client(server: LiveServer, headers: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60, verify=TLS)


async def poll(server: LiveServer, observed: Observed, job_id: int) -> None:
    async with client(server, server.headers("admin")) as http:
        for _ in range(POLLS_EACH):
            await observed.send(http, "GET", f"/v1/jobs/{job_id}")


async def submit(server: LiveServer, observed: Observed, name: str) -> None:
    headers = {**server.headers("submitter"), "Idempotency-Key": str(uuid.uuid4())}
    async with client(server, headers) as http:
        response = await observed.send(http, "POST", "/v1/jobs", json={"spec": {**SPEC, "name": name}})
        if response.status_code == 201:
            observed.acknowledged[name] = response.json()["id"]


async def hold_job_through_the_burst(server: LiveServer, observed: Observed) -> int:
    """Claim the job, keep its lease with heartbeats while the burst runs, then report its result."""
    async with client(server, server.headers("worker")) as http:
        worker = (await http.post("/v1/workers", json={"name": "gpu-box", "capabilities": CPU})).json()
        lease = (await http.post("/v1/leases", json={"worker_id": worker["id"]})).json()
        job_id, token, spec = lease["job"]["id"], lease["lease_token"], lease["job"]["spec"]
        burst = asyncio.gather(
            *(poll(server, observed, job_id) for _ in range(POLLERS)),
            *(submit(server, observed, f"burst-{index}") for index in range(SUBMITS)),
        )
        while not burst.done():
            await observed.send(http, "POST", f"/v1/leases/{job_id}/heartbeat", json={"lease_token": token})
            await asyncio.sleep(0.2)
        await burst
        await observed.send(http, "POST", f"/v1/leases/{job_id}/complete",
                            json={"lease_token": token, "result": result_document(spec)})
        return job_id


@pytest.mark.slow
@pytest.mark.serial
def test_200_pollers_and_50_submits_while_a_worker_holds_a_job(any_live_server: LiveServer) -> None:
    server = any_live_server
    with server.client("submitter") as http:
        held_id = http.post("/v1/jobs", json={"spec": {**SPEC, "name": "held"}}).json()["id"]
    observed = Observed()
    asyncio.run(hold_job_through_the_burst(server, observed))

    assert not [status for status in observed.statuses if status >= 500]
    assert observed.slowest_s < SLOWEST_ACCEPTABLE_S
    with server.database.read() as session:
        stored = session.execute(select(Job.name, Job.id).where(Job.name.like("burst-%"))).all()
        held = session.get(Job, held_id)
    assert sorted(stored) == sorted(observed.acknowledged.items())  # each acknowledged once, nothing else
    assert len(observed.acknowledged) == SUBMITS
    assert held is not None and held.status == "succeeded" and held.attempts == 1
    with server.client("submitter") as http:
        assert http.get(f"/v1/jobs/{held_id}/results").status_code == 200
