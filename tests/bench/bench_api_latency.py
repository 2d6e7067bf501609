"""API latency benchmark on SQLite: submit→pickup latency, and p50/p99 with 50 concurrent pollers.

Not a test: it prints figures. Run from the repository root:

    .venv/bin/python -m tests.bench.bench_api_latency [--pollers 50] [--seconds 15] [--pickups 20]

It starts a real `padbench server` subprocess (SQLite in a temporary directory, generated tokens) on
loopback and measures two things:

1. Pickup: an idle worker — the real `Supervisor` loop with its real idle back-off, in this process —
   while jobs are submitted one at a time at random moments. Pickup latency is the job's `started_at`
   minus its `created_at`, both stamped by the database clock. The job's child is a no-op that fails at
   once (the engine is not what is measured here), so its record ends `failed` by design.
2. API latency under load: `--pollers` clients each polling `GET /v1/jobs/{id}` back to back, while one
   submitter posts a job every 0.2 s, for `--seconds`. Latency is client-side wall time per request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from padbench.client.api import PadbenchClient
from padbench.client.demo import Tokens, background, free_loopback_port, padbench_command, wait_until_healthy
from padbench.contract.api import Capabilities
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.loop import Supervisor, WorkerConfig

SPEC = PaddingJobSpec(name="latency-bench", device="cpu", dtype="fp32", attention="sdpa").model_dump(mode="json")


def no_op_job(ctx: ChildContext, spec: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("latency benchmark: the job itself is not run")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def describe(label: str, seconds: list[float]) -> str:
    ms = [value * 1000 for value in seconds]
    return (f"{label:<28} n={len(ms):>6}  p50={percentile(ms, 0.50):8.1f} ms  p99={percentile(ms, 0.99):8.1f} ms"
            f"  max={max(ms):8.1f} ms  mean={statistics.fmean(ms):8.1f} ms")


def measure_pickup(url: str, tokens: Tokens, jobs: int) -> list[float]:
    config = WorkerConfig(name="bench-idle-worker", job_target=f"{__name__}:no_op_job")
    with WorkerApi(url, tokens.worker) as api, PadbenchClient(url, tokens.submitter) as client:
        supervisor = Supervisor(api, config, Capabilities(device="cpu", kernels=["sdpa", "eager"]))
        thread = threading.Thread(target=supervisor.run, daemon=True)
        thread.start()
        latencies = []
        for _ in range(jobs):
            time.sleep(random.uniform(0.5, 1.5))  # land anywhere in the worker's idle back-off
            job_id = client.submit(SPEC).id
            job = client.wait(job_id, poll_s=0.1, timeout_s=60)
            if job.started_at is None:
                raise RuntimeError(f"job {job_id} finished without being started: {job.status.value}")
            latencies.append((job.started_at - job.created_at).total_seconds())
        supervisor.request_stop()
        thread.join(timeout=30)
    return latencies


async def poll(url: str, token: str, job_id: int, until: float, latencies: list[float]) -> int:
    errors = 0
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=httpx.Timeout(30.0, connect=5.0)) as http:
        while time.monotonic() < until:
            started = time.perf_counter()
            response = await http.get(f"/v1/jobs/{job_id}")
            latencies.append(time.perf_counter() - started)
            errors += response.is_error
    return errors


async def submit_steadily(url: str, token: str, until: float, latencies: list[float]) -> int:
    errors = 0
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=httpx.Timeout(30.0, connect=5.0)) as http:
        while time.monotonic() < until:
            started = time.perf_counter()
            response = await http.post("/v1/jobs", json={"spec": SPEC})
            latencies.append(time.perf_counter() - started)
            errors += response.is_error
            await asyncio.sleep(0.2)
    return errors


async def measure_load(url: str, tokens: Tokens, pollers: int, seconds: float) -> dict[str, Any]:
    with PadbenchClient(url, tokens.submitter) as client:
        job_id = client.submit(SPEC).id
    until = time.monotonic() + seconds
    reads: list[float] = []
    writes: list[float] = []
    errors = await asyncio.gather(
        *(poll(url, tokens.submitter, job_id, until, reads) for _ in range(pollers)),
        submit_steadily(url, tokens.submitter, until, writes),
    )
    return {"reads": reads, "writes": writes, "errors": sum(errors), "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pollers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--pickups", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="padbench-bench-") as scratch:
        workdir = Path(scratch)
        tokens = Tokens.generate()
        tokens.write(workdir / "tokens")
        port = free_loopback_port()
        url = f"http://127.0.0.1:{port}"
        env = os.environ | {"PADBENCH_TOKENS_FILE": str(workdir / "tokens"),
                            "PADBENCH_DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}"}
        command = padbench_command("server", "--host", "127.0.0.1", "--port", str(port))
        with background(command, workdir / "server.log", env) as server:
            wait_until_healthy(url, server, workdir / "server.log")
            load_1m = os.getloadavg()[0]  # the box is shared: say how busy it was
            print(f"padbench API latency on SQLite ({url}, {os.cpu_count()} CPUs, load {load_1m:.1f}, "
                  f"Python {sys.version.split()[0]})")
            pickups = measure_pickup(url, tokens, args.pickups)
            print(describe("submit -> pickup (idle)", pickups))
            load = asyncio.run(measure_load(url, tokens, args.pollers, args.seconds))
            print(describe(f"GET job, {args.pollers} pollers", load["reads"]))
            print(describe("POST job under that load", load["writes"]))
            rate = len(load["reads"]) / load["seconds"]
            print(f"{'throughput':<28} {rate:.0f} reads/s, {len(load['writes'])} writes, {load['errors']} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
