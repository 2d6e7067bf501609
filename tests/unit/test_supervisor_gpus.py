"""A worker with several GPUs runs jobs at once on disjoint GPUs, each child seeing only its own through
CUDA_VISIBLE_DEVICES; it claims while GPUs are free, saying how many; a stop releases every lease it holds.
Real spawned children, an in-process fake server."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from padbench.contract.api import Capabilities, GpuInfo
from padbench.worker.runtime import launcher
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.gpus import GpuPool
from padbench.worker.supervisor.loop import Supervisor, WorkerConfig
from padbench.worker.supervisor.specs import SpecRefused, job_spec
from tests.unit.test_supervisor_loop import TARGETS, FakeServer, lease_body, process_alive, wait_for

pytestmark = pytest.mark.usefixtures("supervised_kind")  # the leases carry its specs


class NumberedJobs(FakeServer):
    """Each claim gets the next job with an id and lease token of its own (1 → `lease-1`, …)."""

    def __init__(self, jobs: list[dict[str, Any]], **options: Any) -> None:
        super().__init__(jobs=jobs, **options)
        self.granted = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/leases") and self.jobs:
            self.calls.append(("leases", json.loads(request.content)))
            self.granted += 1
            lease = lease_body(self.jobs.pop(0), job_id=self.granted) | {"lease_token": f"lease-{self.granted}"}
            return httpx.Response(200, json=lease)
        return super().handle(request)

    def claims(self) -> list[Any]:
        return [body for action, body in self.calls if action == "leases"]


def gpu_worker(server: FakeServer, target: str, owned: int, **config: Any) -> Supervisor:
    api = WorkerApi("http://padbench.test", "w0rker", transport=httpx.MockTransport(server.handle))
    gpus = [GpuInfo(index=str(index), name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 2**30) for index in range(owned)]
    capabilities = Capabilities(device="cuda" if gpus else "cpu", gpus=gpus)
    settings = WorkerConfig(name="unit", job_target=f"{TARGETS}:{target}", idle_poll_first_s=0.01,
                            idle_poll_max_s=0.05, **config)
    return Supervisor(api, settings, capabilities)


def run_in_background(sup: Supervisor) -> threading.Thread:
    thread = threading.Thread(target=sup.run)
    thread.start()
    return thread


def test_two_one_gpu_jobs_run_at_once_on_disjoint_gpus(tmp_path: Path) -> None:
    records = [tmp_path / "first.json", tmp_path / "second.json"]
    server = NumberedJobs([{"record": str(record), "seconds": 2.0} for record in records])
    sup = gpu_worker(server, "record_gpus_then_finish", owned=2)
    thread = run_in_background(sup)
    wait_for(lambda: server.actions().count("complete") == 2, timeout_s=60)
    sup.request_stop()
    thread.join(timeout=20)
    first, second = (json.loads(record.read_text()) for record in records)
    assert {first["gpus"], second["gpus"]} == {"0", "1"}
    assert first["started"] < second["ended"] and second["started"] < first["ended"]  # they overlapped
    assert [claim.get("gpus_free") for claim in server.claims()][:2] == [2, 1]
    assert {body["lease_token"] for action, body in server.calls if action == "complete"} == {"lease-1", "lease-2"}
    assert sup.jobs_run == 2 and sup.gpus.free == 2


def test_a_worker_with_every_gpu_busy_claims_nothing_until_one_is_free(tmp_path: Path) -> None:
    records = [tmp_path / f"{number}.json" for number in range(3)]
    server = NumberedJobs([{"record": str(record), "seconds": 1.5} for record in records])
    sup = gpu_worker(server, "record_gpus_then_finish", owned=2)
    thread = run_in_background(sup)
    wait_for(lambda: server.actions().count("complete") == 3, timeout_s=60)
    sup.request_stop()
    thread.join(timeout=20)
    assert 0 not in [claim.get("gpus_free") for claim in server.claims()]  # never claims with no GPU free
    third = json.loads(records[2].read_text())
    assert third["started"] >= min(json.loads(record.read_text())["ended"] for record in records[:2])


def test_a_stop_releases_every_lease_held_and_kills_every_child(tmp_path: Path) -> None:
    pid_files = [tmp_path / "a.pid", tmp_path / "b.pid"]
    server = NumberedJobs([{"pid_file": str(pid_file)} for pid_file in pid_files])
    sup = gpu_worker(server, "run_until_killed", owned=2)
    thread = run_in_background(sup)
    wait_for(lambda: all(pid_file.exists() for pid_file in pid_files))
    sup.request_stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
    released = sorted(body["lease_token"] for action, body in server.calls if action == "release")
    assert released == ["lease-1", "lease-2"]
    assert not any(process_alive(int(pid_file.read_text())) for pid_file in pid_files)


def without_heartbeats(server: NumberedJobs) -> list[str]:
    """The calls that decide a job's fate: a heartbeat may fall inside a short job on a loaded machine."""
    return [action for action in server.actions() if action != "heartbeat"]


def test_once_returns_after_the_first_job_while_gpus_were_still_free(tmp_path: Path) -> None:
    server = NumberedJobs([{"record": str(tmp_path / "only.json"), "seconds": 0.2}, {"kind": "padding"}])
    sup = gpu_worker(server, "record_gpus_then_finish", owned=2, once=True)
    sup.run()
    assert sup.jobs_run == 1 and without_heartbeats(server) == ["workers", "leases", "complete"]


@pytest.mark.parametrize(("owned", "spec", "ranks", "visible"), [
    (4, {"gpus": 2}, 2, "0,1"),
    (4, {"gpus": "all"}, 4, "0,1,2,3"),
    (0, {"gpus": 3, "device": "cpu"}, 3, None),  # CPU ranks on a worker without GPUs
    (0, {}, 1, None),
])
def test_a_job_is_launched_as_one_rank_per_gpu_it_holds(monkeypatch: pytest.MonkeyPatch, owned: int,
                                                        spec: dict[str, Any], ranks: int, visible: str | None) -> None:
    launched: list[tuple[int, str | None]] = []

    def launch_job(target: str, spec: dict[str, Any], *, ranks: int, env: dict[str, str], **_: Any) -> ChildReport:
        launched.append((ranks, env.get("CUDA_VISIBLE_DEVICES")))
        return ChildReport(outcome="error", error="recorded")

    monkeypatch.setattr(launcher, "launch_job", launch_job)
    server = NumberedJobs([spec])
    gpu_worker(server, "raise_error", owned=owned, once=True).run()
    assert launched == [(ranks, visible)]


def test_a_job_needing_more_gpus_than_are_free_is_released_not_run() -> None:
    server = NumberedJobs([{"gpus": 4}, {"kind": "padding"}])
    sup = gpu_worker(server, "raise_error", owned=2, once=True)
    sup.run()  # --once counts the job it ran, not the one it gave back
    assert without_heartbeats(server) == ["workers", "leases", "release", "leases", "fail"]
    assert server.last("release") == {"lease_token": "lease-1"} and server.last("fail")["lease_token"] == "lease-2"
    assert sup.jobs_run == 1 and sup.gpus.free == 2


def test_the_pool_hands_out_disjoint_gpus_in_the_workers_order() -> None:
    pool = GpuPool(["0", "1", "2", "3"])
    first, second = pool.take(1), pool.take(2)
    assert (first, second, pool.take(2)) == (("0",), ("1", "2"), None)
    pool.give_back(first or ())
    assert pool.take(2) == ("0", "3") and pool.free == 0
    with pytest.raises(SpecRefused, match=r"^spec: gpus: "):  # refused when the lease's spec is parsed
        job_spec({"kind": "supervised", "gpus": 0})
