"""The supervisor's backends: a worker that runs jobs on its own host joins gangs of workers for jobs across
several; one that hands its jobs to a scheduler (`padbench worker --slurm`) claims, and joins no gang, since a
member's ranks run on the member's own host."""

from __future__ import annotations

import threading

import httpx

from padbench.contract.api import Capabilities
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.backend import JobBackend, JobRun
from padbench.worker.supervisor.loop import Supervisor, WorkerConfig
from tests.unit.test_supervisor_loop import FakeServer


class ElsewhereBackend:
    """Stands for a scheduler's backend: it is never handed a run here (the fake server has no job)."""

    name = "slurm"

    def run(self, run: JobRun) -> ChildReport:
        raise AssertionError(f"job {run.job_id} was handed to the backend")


def polled_actions(backend: JobBackend | None) -> list[str]:
    """What a worker with `backend` asks an empty queue for over a few idle polls."""
    server = FakeServer()
    api = WorkerApi("http://padbench.test", "w0rker", transport=httpx.MockTransport(server.handle))
    stop = threading.Event()
    config = WorkerConfig(name="unit", idle_poll_first_s=0.01, idle_poll_max_s=0.02)
    worker = Supervisor(api, config, Capabilities(device="cpu"), stop, backend)
    thread = threading.Thread(target=worker.run)
    thread.start()
    stop.wait(0.3)
    stop.set()
    thread.join(timeout=10)
    return server.actions()


def test_a_local_worker_looks_for_a_gang_when_nothing_is_queued_for_it_alone() -> None:
    actions = polled_actions(None)
    assert actions.count("leases") >= 2 and "gangs" in actions


def test_a_worker_that_hands_jobs_to_a_scheduler_joins_no_gang() -> None:
    actions = polled_actions(ElsewhereBackend())
    assert actions.count("leases") >= 2 and "gangs" not in actions
