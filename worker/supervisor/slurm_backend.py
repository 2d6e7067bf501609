"""Running a claimed job on a Slurm cluster: a batch script per attempt, submitted, watched, cancelled.

The worker stays the job's only voice to the server: it holds the lease and heartbeats it while the job waits
in Slurm's queue and while it runs, and reports how it ended. The job itself runs as `srun padbench-rank DIR`,
one task per node, where DIR (on a file system the nodes share with the worker) holds the spec and receives the
job's progress, partial results and report (see `padbench.worker.runtime.jobdir`). A cancel, a lost lease or a
stop request becomes `scancel`. When the job ends without a report (Slurm killed it, a node failed), the failure
says what Slurm says — its state, reason and exit code — and ends with the tail of the job's stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import shlex
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from padbench.worker.jobs import spec_json
from padbench.worker.runtime.isolation import ChildReport, Outcome
from padbench.worker.runtime.jobdir import JobDirectory, RunOrder, job_report
from padbench.worker.supervisor import slurm
from padbench.worker.supervisor.backend import JobRun

log = logging.getLogger("padbench.worker")

# Slurm's own time limit is the job's timeout plus this, so the job's own deadline (which reports what the job
# finished) fires first; Slurm's ends a job whose node stopped answering.
SLURM_TIME_MARGIN_S = 600.0
# After a scancel, how long to wait for Slurm to say the job ended (its KillWait is 30 s by default).
CANCEL_WAIT_S = 90.0
STDERR_TAIL_CHARS = 2000
# How long the controller may leave the job's state unanswered (a restart, a failover) before the run is given up.
UNANSWERED_LIMIT_S = 600.0
# Never handed to the job: the worker's credentials for the server.
PRIVATE_VARIABLES = ("PADBENCH_TOKEN", "PADBENCH_TOKEN_FILE")
# How a job Slurm ended without a report from padbench-rank is reported; any other end is a crash.
SLURM_OUTCOMES: dict[str, Outcome] = {"TIMEOUT": "timeout", "DEADLINE": "timeout", "OUT_OF_MEMORY": "oom"}


@dataclass(frozen=True)
class SlurmOptions:
    directory: Path  # job directories go here: a file system the cluster's nodes share with this host
    partition: str | None = None
    sbatch_args: tuple[str, ...] = ()  # passed to sbatch as they are (--account, --qos, --constraint, …)
    cpus_per_node: int = 1  # what a job on the CPU asks for on each node
    gpus_per_node: int = 0  # the GPUs (GRES `gpu`) of each node: what the worker offers the server
    nodes: int = 1  # the most nodes one job spans in the partition: the `nodes: M` jobs the worker claims whole
    poll_s: float = 1.0


def rank_command() -> list[str]:
    """How a node starts `padbench-rank`: the one installed beside this worker's Python (the same install the
    nodes must see), else the module run by that Python."""
    beside = Path(sys.executable).with_name("padbench-rank")
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "padbench.worker.cli.rank"]


def batch_script(run: JobRun, directory: JobDirectory, options: SlurmOptions, nodes: int, time_limit_s: float) -> str:
    """The batch script of one attempt: one `padbench-rank` task per node, with the node's GPUs or CPUs."""
    minutes = max(1, math.ceil((time_limit_s + SLURM_TIME_MARGIN_S) / 60))
    lines = ["#!/bin/bash", f"#SBATCH --job-name=padbench-{run.job_id}", f"#SBATCH --nodes={nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --time={minutes}",
             f"#SBATCH --output={directory.path / 'slurm-%j.out'}",
             f"#SBATCH --error={directory.path / 'slurm-%j.err'}",
             f"#SBATCH --chdir={directory.workdir}"]
    if options.partition is not None:
        lines.append(f"#SBATCH --partition={options.partition}")
    if run.gpus:
        lines.append(f"#SBATCH --gres=gpu:{len(run.gpus)}")
    else:
        lines.append(f"#SBATCH --cpus-per-task={options.cpus_per_node}")
    lines += [f"#SBATCH {argument}" for argument in options.sbatch_args]  # after ours: the operator's win
    command = shlex.join([*rank_command(), str(directory.path)])
    lines += ["set -eu", f"exec srun --nodes={nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 {command}", ""]
    return "\n".join(lines)


def job_environment() -> dict[str, str]:
    """The worker's environment less its server credentials: sbatch hands the rest to the job's tasks."""
    return {key: value for key, value in os.environ.items() if key not in PRIVATE_VARIABLES}


def stderr_tail(directory: JobDirectory, slurm_id: str) -> str:
    try:
        text = (directory.path / f"slurm-{slurm_id}.err").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-STDERR_TAIL_CHARS:].strip()


class SlurmBackend:
    """Each run as one Slurm job; see the module's docstring."""

    name = "slurm"

    def __init__(self, options: SlurmOptions, worker: str, target: str, timeout_s: float,
                 memory_cap_bytes: int | None) -> None:
        self.options, self.worker, self.target = options, worker, target
        self.timeout_s, self.memory_cap_bytes = timeout_s, memory_cap_bytes

    def run(self, run: JobRun) -> ChildReport:
        started = time.monotonic()
        directory = JobDirectory(self.options.directory / f"job-{run.job_id}-{run.attempt}-{uuid.uuid4().hex[:8]}")
        try:
            return dataclasses.replace(self._submit_and_watch(run, directory), seconds=time.monotonic() - started)
        except OSError as error:  # the shared directory full or gone: the job cannot be handed over
            return ChildReport(outcome="error", error=f"could not write the job's directory {directory.path}: {error}",
                               seconds=time.monotonic() - started)
        finally:
            shutil.rmtree(directory.path, ignore_errors=True)

    def _submit_and_watch(self, run: JobRun, directory: JobDirectory) -> ChildReport:
        nodes = run.spec.nodes
        directory.create(RunOrder(target=self.target, spec_text=spec_json(run.spec), ranks_per_node=run.ranks,
                                  nodes=nodes, timeout_s=self.timeout_s, memory_cap_bytes=self.memory_cap_bytes,
                                  worker=self.worker))
        script = directory.path / "job.sbatch"
        script.write_text(batch_script(run, directory, self.options, nodes, self.timeout_s), encoding="utf-8")
        try:
            slurm_id = slurm.submit(script, job_environment())
        except slurm.SlurmError as error:
            return ChildReport(outcome="error", error=f"Slurm refused the job: {error}")
        log.info("job %d: submitted to Slurm as job %s (%s)", run.job_id, slurm_id, directory.path)
        return SlurmWatch(run, directory, slurm_id, nodes, self.options.poll_s).until_finished()


class SlurmWatch:
    """One submitted job, followed until Slurm says it ended: its progress and partial results are handed on as
    they change, and a stop becomes `scancel`."""

    def __init__(self, run: JobRun, directory: JobDirectory, slurm_id: str, nodes: int, poll_s: float) -> None:
        self.run, self.directory, self.slurm_id, self.nodes, self.poll_s = run, directory, slurm_id, nodes, poll_s
        self._progress: tuple[float, str] | None = None
        self._partial: object = None
        self._state: str | None = None

    def until_finished(self) -> ChildReport:
        unanswered_since: float | None = None
        while True:
            try:
                state = slurm.job_state(self.slurm_id)
                unanswered_since = None
            except slurm.SlurmError as error:  # the controller restarting, say: the job itself may run on
                unanswered_since = unanswered_since or time.monotonic()
                if time.monotonic() - unanswered_since > UNANSWERED_LIMIT_S:
                    return self._give_up(error)
                log.warning("Slurm job %s: its state could not be read (%s); asking again", self.slurm_id, error)
            else:
                self._hand_on(state)
                if state is None or state.finished:
                    return self._ended(state)
            if self.run.should_stop():
                return self._cancel()
            time.sleep(self.poll_s)

    def _hand_on(self, state: slurm.SlurmJobState | None) -> None:
        progress = self.directory.progress()
        if progress is not None and progress != self._progress:
            self._progress = progress
            self.run.on_progress(*progress)
        elif self._progress is None and state is not None and state.state != self._state:
            # Until the job says anything, the person waiting sees where it is in Slurm.
            self.run.on_progress(0.0, f"Slurm job {self.slurm_id}: {state.state} ({state.reason})")
        self._state = state.state if state is not None else None
        partial = self.directory.partial()
        if partial is not None and partial != self._partial:
            self._partial = partial
            self.run.on_finished(partial)

    def _cancel(self) -> ChildReport:
        log.info("Slurm job %s: cancelling it (scancel)", self.slurm_id)
        try:
            slurm.cancel(self.slurm_id)
        except slurm.SlurmError as error:
            log.error("Slurm job %s: scancel failed: %s", self.slurm_id, error)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            try:
                state = slurm.job_state(self.slurm_id)
            except slurm.SlurmError:
                state = slurm.SlurmJobState("UNKNOWN", "None", "0:0")  # not answering: ask again
            if state is None or state.finished:
                break
            time.sleep(self.poll_s)
        self._hand_on(None)  # a row finished just before the cancel is kept
        return ChildReport(outcome="cancelled", error=f"stopped by the parent; Slurm job {self.slurm_id} cancelled")

    def _give_up(self, error: slurm.SlurmError) -> ChildReport:
        with contextlib.suppress(slurm.SlurmError):  # if it can still be reached, nothing runs on unwatched
            slurm.cancel(self.slurm_id)
        return ChildReport(outcome="error", error=f"Slurm did not say how job {self.slurm_id} stands for "
                                                  f"{UNANSWERED_LIMIT_S:.0f} s ({error}); it was cancelled")

    def _ended(self, state: slurm.SlurmJobState | None) -> ChildReport:
        report = job_report(self.directory.reports(self.nodes), self.nodes)
        if report is not None:
            return report
        said = (f"Slurm job {self.slurm_id} ended {state.state} (reason {state.reason}, exit code {state.exit_code})"
                if state is not None else f"Slurm no longer knows job {self.slurm_id}")
        tail = stderr_tail(self.directory, self.slurm_id)
        error = f"{said} without a report from padbench-rank" + (f"; its stderr ends: {tail}" if tail else "")
        return ChildReport(outcome=SLURM_OUTCOMES.get(state.state if state else "", "crash"), error=error)
