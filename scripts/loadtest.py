"""Load test: a team polling one padbench server while a worker holds a job. Plain httpx on asyncio (no locust).

Not a test: it prints figures. From the repository root:

    .venv/bin/python scripts/loadtest.py --clients 10 50 200 500 --seconds 20
    .venv/bin/python scripts/loadtest.py --database-url postgresql://postgres@127.0.0.1:5432/loadtest
    .venv/bin/python scripts/loadtest.py --clients 200 --think-s 0 --server-processes 2 --cpu-jobs 1
    .venv/bin/python scripts/loadtest.py --clients 50 200 --think-s 0 --cpu-jobs 1 --health-process

It starts a real `padbench server` subprocess on loopback (a fresh SQLite file in a temporary directory unless
`--database-url` names a database, which it empties first) and, for each client count, runs for `--seconds`:
- N clients, each on its own connection, pausing `--think-s` between requests (0.5 s, as `padbench wait`
  polls; 0 sends back to back, a stress test), doing what people running `padbench wait`, `padbench list`
  and the dashboard do: 80 % `GET /v1/jobs/{id}`, 10 % `GET /v1/jobs?limit=20`, 10 % `POST /v1/jobs`
  (each submit with its own Idempotency-Key);
- one worker holding a job: it claims, heartbeats every second, and completes the job when the period ends.
`--server-processes N` runs `padbench server --workers N`; `--cpu-jobs K` keeps K processes spinning on the CPU
beside the server for the whole run, as a worker's job does on a GPU box; `/healthz` is probed every 0.25 s on
a connection of its own, as a load balancer does (from a process of its own, so the load generator's busy event
loop does not add its own delays), and its p99 and worst latency reported; `--health-process`
starts the server with `--health-port` and probes the health process's `/healthz` the same way, beside the API's.
Latency is client-side wall time per request. Errors are any 5xx, 429, timeout or refused connection; a 503
with Retry-After (the server saying it is saturated) is counted apart, since clients retry it.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import ssl
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from padbench.client.demo import Tokens, background, free_loopback_port, padbench_command, wait_until_healthy
from padbench.contract.api import Capabilities
from padbench.kinds.padding.contract import PaddingJobSpec

SPEC = PaddingJobSpec(name="loadtest", device="cpu", dtype="fp32", attention="sdpa").model_dump(mode="json")
REQUEST_TIMEOUT_S = 60.0
SEED_JOBS = 20
HEARTBEAT_EVERY_S = 1.0
HEALTH_PROBE_EVERY_S = 0.25
# A CPU-bound job: pure Python spinning on one core until it is stopped.
CPU_JOB = [sys.executable, "-c", "while True: pass"]


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    submitted_ids: list[int] = field(default_factory=list)

    def record(self, started: float, outcome: str) -> None:
        self.latencies_s.append(time.perf_counter() - started)
        self.outcomes[outcome] += 1


def outcome_of(response: httpx.Response) -> str:
    if response.status_code == 503 and "retry-after" in response.headers:
        return "503+Retry-After"
    return str(response.status_code) if response.status_code >= 400 else "ok"


async def one_client(http: httpx.AsyncClient, headers: dict[str, str], job_ids: list[int], stop_at: float,
                     tally: Tally, think_s: float) -> None:
    await asyncio.sleep(random.uniform(0, think_s))  # people do not start in step
    while time.perf_counter() < stop_at:
        if think_s:
            await asyncio.sleep(think_s)
        draw = random.random()
        started = time.perf_counter()
        try:
            if draw < 0.8:
                response = await http.get(f"/v1/jobs/{random.choice(job_ids)}", headers=headers)
            elif draw < 0.9:
                response = await http.get("/v1/jobs", params={"limit": 20}, headers=headers)
            else:
                keyed = {**headers, "Idempotency-Key": str(uuid.uuid4())}
                response = await http.post("/v1/jobs", json={"spec": SPEC}, headers=keyed)
                if response.status_code in (200, 201):
                    tally.submitted_ids.append(response.json()["id"])
        except httpx.TimeoutException:
            tally.record(started, "timeout")
            continue
        except httpx.TransportError as error:
            tally.record(started, type(error).__name__)
            await asyncio.sleep(0.1)
            continue
        tally.record(started, outcome_of(response))
        if response.status_code == 503:
            await asyncio.sleep(float(response.headers.get("retry-after", "1")) * random.uniform(0.5, 1.5))


@dataclass
class WorkerRun:
    heartbeats_s: list[float] = field(default_factory=list)
    health_probes_s: list[float] = field(default_factory=list)
    health_process_probes_s: list[float] = field(default_factory=list)  # with --health-process
    heartbeat_failures: Counter[str] = field(default_factory=Counter)
    claimed_job: int | None = None
    completed: str = "not reported"


async def hold_a_job(url: str, token: str, stop_at: float, run: WorkerRun) -> None:
    try:
        await worker_traffic(url, token, stop_at, run)
    except httpx.HTTPError as error:
        run.completed = f"lost: a worker call failed ({type(error).__name__})"


async def worker_traffic(url: str, token: str, stop_at: float, run: WorkerRun) -> None:
    """A worker's traffic: claim a job, heartbeat every second until `stop_at`, then report its end."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, headers=headers) as http:
        capabilities = Capabilities(device="cpu", kernels=["sdpa"], job_kinds=["padding"]).model_dump(mode="json")
        worker = (await http.post("/v1/workers", json={"name": f"load-{uuid.uuid4().hex[:8]}",
                                                       "capabilities": capabilities})).json()
        claimed = await http.post("/v1/leases", json={"worker_id": worker["id"]})
        if claimed.status_code != 200:
            run.completed = f"claim answered {claimed.status_code}"
            return
        lease = claimed.json()
        run.claimed_job, token_body = lease["job"]["id"], {"lease_token": lease["lease_token"]}
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                beat = await http.post(f"/v1/leases/{run.claimed_job}/heartbeat", json=token_body)
                run.heartbeats_s.append(time.perf_counter() - started)
                if beat.status_code != 200:
                    run.heartbeat_failures[str(beat.status_code)] += 1
            except httpx.HTTPError as error:
                run.heartbeat_failures[type(error).__name__] += 1
            await asyncio.sleep(HEARTBEAT_EVERY_S)
        fail = await http.post(f"/v1/leases/{run.claimed_job}/fail",
                               json={**token_body, "error": "load test: the job is not run"})
        run.completed = "kept" if fail.status_code == 204 else f"refused with {fail.status_code}"


def probe_all(urls: list[str], seconds: float) -> list[list[float]]:
    """The probes of each of `urls` for `seconds`: run in a process of its own by `measure`, so that a probe's
    time is the server's and not the wait for this process's own event loop, busy with hundreds of clients."""

    async def probe_each() -> list[list[float]]:
        stop_at = time.perf_counter() + seconds
        latencies: list[list[float]] = [[] for _ in urls]
        await asyncio.gather(*(probe_health(url, stop_at, taken) for url, taken in zip(urls, latencies, strict=True)))
        return latencies

    return asyncio.run(probe_each())


async def probe_health(url: str, stop_at: float, latencies_s: list[float]) -> None:
    """A load balancer's probe: `/healthz` every HEALTH_PROBE_EVERY_S on its own connection."""
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            # A probe that fails is counted by its time: failing late is as bad as answering late.
            with suppress(httpx.HTTPError):
                await http.get("/healthz")
            latencies_s.append(time.perf_counter() - started)
            await asyncio.sleep(HEALTH_PROBE_EVERY_S)


async def seed_jobs(url: str, token: str) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S,
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        return [(await http.post("/v1/jobs", json={"spec": SPEC})).json()["id"] for _ in range(SEED_JOBS)]


async def measure(url: str, tokens: Tokens, clients: int, seconds: float, think_s: float,
                  health_url: str | None) -> tuple[Tally, WorkerRun, float]:
    job_ids = await seed_jobs(url, tokens.submitter)
    tally, worker_run = Tally(), WorkerRun()
    headers = {"Authorization": f"Bearer {tokens.submitter}"}
    # One httpx client (one connection) per simulated person: a shared client with hundreds of connections
    # spends more CPU finding a free connection than the server spends answering. They share one TLS
    # context (unused on http://, but building one per client takes longer than the run).
    tls = ssl.create_default_context()
    people = [httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, verify=tls) for _ in range(clients)]
    started = time.perf_counter()
    stop_at = started + seconds
    probe_urls = [url, *([health_url] if health_url else [])]
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as prober:
        probed = asyncio.wrap_future(prober.submit(probe_all, probe_urls, seconds))
        try:
            await asyncio.gather(
                hold_a_job(url, tokens.worker, stop_at, worker_run),
                *(one_client(http, headers, job_ids, stop_at, tally, think_s) for http in people),
            )
        finally:
            await asyncio.gather(*(http.aclose() for http in people))
        worker_run.health_probes_s, *process_probes = await probed
    worker_run.health_process_probes_s = process_probes[0] if process_probes else []
    return tally, worker_run, time.perf_counter() - started


def percentile_ms(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary_line(backend: str, clients: int, tally: Tally, worker: WorkerRun, elapsed: float) -> str:
    errors = sum(count for outcome, count in tally.outcomes.items() if outcome not in ("ok", "503+Retry-After"))
    shed = tally.outcomes.get("503+Retry-After", 0)
    total = sum(tally.outcomes.values())
    error_kinds = ", ".join(f"{count}×{kind}" for kind, count in tally.outcomes.items() if kind != "ok") or "none"
    beats = (f"heartbeat p99 {percentile_ms(worker.heartbeats_s, 0.99):.0f} ms, "
             f"max {1000 * max(worker.heartbeats_s, default=0):.0f} ms")
    p50, p99 = percentile_ms(tally.latencies_s, 0.5), percentile_ms(tally.latencies_s, 0.99)
    health = probe_figures(worker.health_probes_s)
    health_process = probe_figures(worker.health_process_probes_s) if worker.health_process_probes_s else "–"
    return (f"| {backend} | {clients} | {total / elapsed:.0f} | {p50:.0f} ms "
            f"| {p99:.0f} ms | {p99 / p50:.1f}× | {health} | {health_process} | {errors} | {shed} "
            f"| {beats}; result {worker.completed}"
            f" | {error_kinds} |")


def probe_figures(latencies_s: list[float]) -> str:
    return f"{percentile_ms(latencies_s, 0.99):.0f} ms / {1000 * max(latencies_s, default=0):.0f} ms"


def empty_database(database_url: str) -> None:
    """A PostgreSQL database named on the command line starts empty, so runs compare on equal tables."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@contextmanager
def cpu_jobs(count: int, directory: Path) -> Iterator[None]:
    """`count` CPU-bound processes running until the block ends."""
    with ExitStack() as stack:
        for index in range(count):
            stack.enter_context(background(CPU_JOB, directory / f"cpu-job-{index}.log", dict(os.environ)))
        yield


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[10, 50, 200, 500])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--think-s", type=float, default=0.5,
                        help="each client's pause between requests (0.5 s: how often `padbench wait` polls; "
                             "0: back to back, a stress test)")
    parser.add_argument("--database-url", help="PostgreSQL URL (emptied first); default: a fresh SQLite file")
    parser.add_argument("--server-processes", type=int, default=1, help="padbench server --workers N (default 1)")
    parser.add_argument("--cpu-jobs", type=int, default=0,
                        help="processes spinning on the CPU beside the server for the whole run (default 0)")
    parser.add_argument("--health-process", action="store_true",
                        help="padbench server --health-port: probe the health process's /healthz too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="padbench-load-") as scratch:
        directory = Path(scratch)
        tokens = Tokens.generate()
        tokens.write(directory / "tokens")
        database_url = args.database_url or f"sqlite:///{directory / 'load.sqlite3'}"
        if args.database_url:
            empty_database(args.database_url)
        port = free_loopback_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PADBENCH_TOKENS_FILE": str(directory / "tokens"), "PADBENCH_DATABASE_URL": database_url,
               "PADBENCH_LEASE_SECONDS": "10"}
        backend = "PostgreSQL" if database_url.startswith("postgres") else "SQLite"
        log_path = directory / "server.log"
        print(f"server processes: {args.server_processes}, CPU-bound jobs beside it: {args.cpu_jobs}, "
              f"load average before: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
        print("| backend | clients | req/s | p50 | p99 | p99/p50 | /healthz p99 / worst | health process /healthz "
              "p99 / worst | errors | 503 shed | worker | outcomes |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
        server_command = padbench_command("server", "--port", str(port), "--log-level", "warning",
                                          "--workers", str(args.server_processes))
        health_url = None
        if args.health_process:
            health_port = free_loopback_port()
            server_command += ["--health-port", str(health_port)]
            health_url = f"http://127.0.0.1:{health_port}"
        with background(server_command, log_path, env) as server, cpu_jobs(args.cpu_jobs, directory):
            wait_until_healthy(url, server, log_path)
            time.sleep(2 * args.server_processes)  # the first process answers before the others are up
            for clients in args.clients:
                tally, worker, elapsed = asyncio.run(measure(url, tokens, clients, args.seconds, args.think_s,
                                                             health_url))
                print(summary_line(backend, clients, tally, worker, elapsed), flush=True)
            print(f"load average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
        print(f"server log tail:\n{log_path.read_text(errors='replace')[-2000:]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
