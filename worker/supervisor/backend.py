"""Where a claimed job's processes run: a backend the supervisor hands each run to.

The supervisor owns the lease (heartbeats, cancel, reports); a backend owns the processes. The local backend
runs the job in a spawned child on this host (`launch_job`); the Slurm backend (`slurm_backend.py`) submits it
to a cluster's scheduler and watches it there. Either way the run ends in one `ChildReport`, and the supervisor
settles the lease from it the same way.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from padbench.contract.spec import JobSpecBase
from padbench.worker.jobs import spec_json
from padbench.worker.runtime import launcher
from padbench.worker.runtime.isolation import ChildReport, FinishedFn
from padbench.worker.runtime.progress import ProgressFn
from padbench.worker.supervisor.gpus import visible_devices


@dataclass(frozen=True)
class JobRun:
    """One attempt at a job, as the supervisor hands it to a backend."""

    job_id: int
    attempt: int
    spec: JobSpecBase  # already confined to the worker's data and model roots
    gpus: tuple[str, ...]  # the worker's GPUs this run holds (none: a CPU job, or a worker without GPUs)
    ranks: int
    on_progress: ProgressFn
    on_finished: FinishedFn
    should_stop: Callable[[], bool]  # a stop request, a cancel or a lost lease: end the run now


class JobBackend(Protocol):
    name: str

    def run(self, run: JobRun) -> ChildReport:
        """Run the job to its end (or until `should_stop`), never raising for what the job does."""


class LocalBackend:
    """The job's processes on this host: one spawned child, or one per rank, in an empty private directory."""

    name = "local"

    def __init__(self, target: str, timeout_s: float, memory_cap_bytes: int | None) -> None:
        self.target, self.timeout_s, self.memory_cap_bytes = target, timeout_s, memory_cap_bytes

    def run(self, run: JobRun) -> ChildReport:
        with tempfile.TemporaryDirectory(prefix="padbench-job-") as workdir:  # empty, private: see confine
            return launcher.launch_job(
                self.target,
                spec_json(run.spec),  # the child parses it once, into the same model
                ranks=run.ranks,
                timeout_s=self.timeout_s,
                memory_cap_bytes=self.memory_cap_bytes,
                env=visible_devices(run.gpus),
                on_progress=run.on_progress,
                on_finished=run.on_finished,
                should_stop=run.should_stop,
                workdir=workdir,
            )
