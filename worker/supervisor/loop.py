"""The worker's main loop: register, claim, run each job in spawned children, heartbeat, report.

The worker owns a pool of GPUs (`gpus.py`). While some are free it claims again, saying how many are free,
and runs each job it gets in a thread of its own on a disjoint set of them (its child sees only those,
through CUDA_VISIBLE_DEVICES), with its own lease keeper; the GPUs go back to the pool when the job is
settled. A worker without GPUs runs one job at a time. A stop request (SIGTERM) ends every job's run and
releases every lease held; `--once` runs the first job claimed and returns when it is settled.

The parent never imports torch: the job runs through the launcher (`launch_job`: one spawned child, or one
per rank; own process group, a wall-clock limit), and everything the parent does is HTTP. How each run ends
decides the one call made to the server: a result → `complete`, whatever became of the lease meanwhile (the
server takes the first result from any of the job's attempts); a crash, OOM, error or timeout → `fail` with
the child's error and traceback; a cancel seen on a heartbeat → `cancelled` with the rows the job finished,
marked partial (or, with none, `fail` saying so: the server records it as cancelled either way); a stop
request (SIGTERM) → `release`, so another worker takes the job at once. A heartbeat answered "the job ended"
stops the child and nothing is reported; one answered "another worker's lease holds the job" leaves the
child running, since its result may still be the first (see `lease.py`).

A finished result is worth a GPU run, so it is saved in the outbox before it is reported, and reported
until the server answers for good (see `reporting.py`); a result still unreported when the worker stops
is delivered when it starts again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from padbench.contract.api import Capabilities, LeaseOut
from padbench.contract.spec import JobSpecBase
from padbench.http import ApiError, jittered_wait
from padbench.worker.runtime.isolation import ChildReport, LatestPartial
from padbench.worker.runtime.settings import DEFAULT_JOB_TIMEOUT_S
from padbench.worker.supervisor import gang
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from padbench.worker.supervisor.backend import JobBackend, JobRun, LocalBackend
from padbench.worker.supervisor.backoff import Backoff
from padbench.worker.supervisor.confine import PathRefused, confine_spec_paths
from padbench.worker.supervisor.gpus import GpuPool, job_ranks
from padbench.worker.supervisor.lease import LeaseKeeper
from padbench.worker.supervisor.outbox import Outbox
from padbench.worker.supervisor.reporting import Reporter, Retrying, priced
from padbench.worker.supervisor.specs import SpecRefused, job_spec

log = logging.getLogger("padbench.worker")

HTTP_UNAUTHORIZED = 401
HTTP_FORBIDDEN = 403


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    job_timeout_s: float = DEFAULT_JOB_TIMEOUT_S
    job_memory_cap_bytes: int | None = None  # the job's processes' resident memory, summed
    # Idle polling starts fast and backs off to this cap, so a new job is picked up within ~0.5 s.
    idle_poll_first_s: float = 0.05
    idle_poll_max_s: float = 0.5
    # When the server is unreachable or erroring, back off further: nothing is lost by waiting. Also the
    # longest wait between tries of a report the server did not answer (unless its Retry-After says more).
    error_poll_max_s: float = 5.0
    once: bool = False
    job_target: str = "padbench.worker.jobs:run_job"
    # Where finished results wait until the server has them; None keeps them in memory only.
    outbox_dir: Path | None = None
    # The roots service jobs' file names resolve in (see padbench.worker.supervisor.confine).
    data_roots: tuple[Path, ...] = ()
    model_roots: tuple[Path, ...] = ()
    price_per_gpu_hour: float | None = None  # stamped on every result reported (`priced`)
    # The address other workers reach this one at, should it host a gang's rendezvous (see `gang.py`);
    # None: what its host name resolves to.
    node_address: str | None = None


class FatalWorkerError(RuntimeError):
    """The server refuses this worker outright (bad token, wrong role): retrying cannot help."""


class Supervisor:
    def __init__(
        self,
        api: WorkerApi,
        config: WorkerConfig,
        capabilities: Capabilities,
        stop_event: threading.Event | None = None,
        backend: JobBackend | None = None,
    ) -> None:
        self.api = api
        # Where each job's processes run: a child on this host unless the worker hands jobs to a scheduler.
        self.backend = backend or LocalBackend(config.job_target, config.job_timeout_s, config.job_memory_cap_bytes)
        self.config = config
        self.capabilities = capabilities
        self.worker_id: int | None = None
        self.jobs_run = 0
        self.gpus = GpuPool([gpu.index for gpu in capabilities.gpus])
        # The job threads running now, by job id; `_settled` wakes the loop when one ends.
        self._jobs: dict[int, threading.Thread] = {}
        self._jobs_lock = threading.Lock()
        self._settled = threading.Event()
        self.outbox = Outbox(config.outbox_dir) if config.outbox_dir is not None else None
        # Shared with the signal handlers, which are installed before the supervisor exists.
        self._stop = stop_event or threading.Event()
        # A stop request also ends a report's retries: the outbox keeps the result for the next start.
        self.reporter = Reporter(api, self.outbox, Retrying(self._stop.wait, config.error_poll_max_s))

    def request_stop(self) -> None:
        """Called from the SIGTERM handler: finish no new work, release what we hold."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        self.worker_id = self._register()
        if self.worker_id is None:
            return
        self.deliver_saved_results()
        try:
            self._claim_while_room()
        except BaseException:
            self.request_stop()  # a worker the server refuses, or a crash: every running job gives its lease back
            raise
        finally:
            self._join_jobs()

    def _claim_while_room(self) -> None:
        idle = Backoff(self.config.idle_poll_first_s, self.config.idle_poll_max_s)
        while not self.stopping:
            self._settled.clear()
            if not self._has_room():  # every GPU busy (or the one job of a worker without GPUs running)
                self._settled.wait(self.config.idle_poll_max_s)
                continue
            lease = self._claim()
            # Nothing for this worker alone: a gang, if one has room. A worker that hands its jobs to a scheduler
            # joins none: a gang member's ranks run on the worker's own host.
            if lease is None and self.backend.name == "local" and gang.join_one(self):
                idle.reset()
                continue
            if lease is None:
                self._stop.wait(idle.next())
                continue
            idle.reset()
            if self._start(lease) and self.config.once:
                return

    def _has_room(self) -> bool:
        if self.gpus.owned:
            return self.gpus.free > 0
        with self._jobs_lock:
            return not self._jobs

    def _start(self, lease: LeaseOut) -> bool:
        """Run the job in a thread of its own on as many free GPUs as it needs; False when it cannot start."""
        job = lease.job
        try:
            spec = job_spec(job.spec)
        except SpecRefused as refused:
            self._refuse(lease, str(refused))
            return False
        ranks = job_ranks(spec, len(self.gpus.owned))
        held = self.gpus.take(ranks) if self.gpus.owned else ()
        if held is None:  # the server thought more were free than are: give the job back for now
            self._refuse(lease, None)
            return False
        self.run_in_thread(job.id, held, lambda: self.run_lease(lease, held, ranks, spec))
        return True

    def run_in_thread(self, job_id: int, held: tuple[str, ...], work: Callable[[], object]) -> None:
        """Run `work` (a job's whole run) in a thread of its own, counted among the running jobs; `held` GPUs go
        back to the pool when it ends."""
        thread = threading.Thread(target=self._run_and_free, args=(job_id, held, work), name=f"job-{job_id}")
        with self._jobs_lock:
            self._jobs[job_id] = thread
        thread.start()

    def _refuse(self, lease: LeaseOut, error: str | None) -> None:
        """A claimed job this worker cannot start: failed with `error`, or (None) released for another claim."""
        job_id, token = lease.job.id, lease.lease_token
        try:
            if error is None:
                log.warning("job %d needs more GPUs than are free here (%d); releasing it", job_id, self.gpus.free)
                self.api.release(job_id, token)
            else:
                self.reporter.fail(job_id, token, f"error: {error}", None)
        except ApiError as failure:
            log.error("job %d: could not hand the job back: %s", job_id, failure)

    def _run_and_free(self, job_id: int, held: tuple[str, ...], work: Callable[[], object]) -> None:
        try:
            work()
        finally:
            self.gpus.give_back(held)
            with self._jobs_lock:
                self._jobs.pop(job_id, None)
                self.jobs_run += 1
            self._settled.set()

    def _join_jobs(self) -> None:
        """Wait for every job's thread: on a stop each one's child is stopped and its lease released."""
        while True:
            with self._jobs_lock:
                threads = list(self._jobs.values())
            if not threads:
                return
            for thread in threads:
                thread.join()

    def _register(self) -> int | None:
        errors = Backoff(0.2, self.config.error_poll_max_s)
        while not self.stopping:
            try:
                worker = self.api.register(self.config.name, self.capabilities)
            except ApiError as error:
                if not error.is_transient:  # refused, not unreachable: retrying cannot change the answer
                    raise FatalWorkerError(f"the server refused to register this worker: {error}") from error
                log.warning("registering with %s failed (%s); retrying", self.api.server, error)
                self._stop.wait(errors.next())
                continue
            log.info("registered as worker %d (%s) with %s", worker.id, worker.name, self.api.server)
            return worker.id
        return None

    def _claim(self) -> LeaseOut | None:
        assert self.worker_id is not None
        try:
            # A worker without GPUs claims only when idle, and says nothing of GPUs.
            return self.api.claim(self.worker_id, self.gpus.free if self.gpus.owned else None)
        except ApiError as error:
            self._raise_if_fatal(error)
            log.warning("claiming a job failed: %s", error)
            # A saturated server names its wait; otherwise back off as for any outage.
            self._stop.wait(jittered_wait(error.retry_after, 0) if error.retry_after is not None
                            else self.config.error_poll_max_s)
            return None

    @staticmethod
    def _raise_if_fatal(error: ApiError) -> None:
        if error.status in (HTTP_UNAUTHORIZED, HTTP_FORBIDDEN):
            raise FatalWorkerError(f"the server refused this worker: {error}") from error

    def run_lease(self, lease: LeaseOut, gpus: tuple[str, ...] = (), ranks: int = 1,
                  spec: JobSpecBase | None = None) -> ChildReport:
        """Run the job on `gpus` (none: whatever the worker sees) as `ranks` processes, then report how it ended.
        `spec` is the lease's spec as its kind's model, when the caller has parsed it already."""
        job = lease.job
        log.info("job %d (%s) claimed, attempt %d of %d, on %s", job.id, job.kind, job.attempts, job.max_attempts,
                 f"GPUs {','.join(gpus)}" if gpus else "this worker")
        # The keeper stays on while the report is retried: its heartbeats keep the lease alive meanwhile.
        partials = LatestPartial()
        with LeaseKeeper(self.api, lease) as keeper:
            try:
                typed = spec if spec is not None else job_spec(job.spec)
                confined = confine_spec_paths(typed, self.config.data_roots, self.config.model_roots)
            except (SpecRefused, PathRefused) as refused:
                report = ChildReport(outcome="error", error=str(refused))
            else:
                report = self._run_child(lease, confined, keeper, partials, gpus, ranks)
            log.info("job %d: child finished: %s in %.1f s", job.id, report.outcome, report.seconds)
            try:
                self._settle(lease, report, keeper, partials.latest)
            except LeaseLost as error:
                log.warning("job %d: the server takes no report under this lease now (%s)", job.id, error)
            except ApiError as error:
                # Only a stop request or a refusal ends the retries; a saved result is offered again at the next start.
                log.error("job %d: could not report to the server: %s", job.id, error)
        return report

    def _run_child(self, lease: LeaseOut, spec: JobSpecBase, keeper: LeaseKeeper, partials: LatestPartial,
                   gpus: tuple[str, ...], ranks: int) -> ChildReport:
        return self.backend.run(JobRun(
            job_id=lease.job.id, attempt=lease.job.attempts, spec=spec, gpus=gpus, ranks=ranks,
            on_progress=keeper.update, on_finished=partials.keep,
            should_stop=lambda: self.stopping or keeper.cancel_requested.is_set() or keeper.lost.is_set()))

    def _settle(self, lease: LeaseOut, report: ChildReport, keeper: LeaseKeeper,
                partial: dict[str, Any] | None) -> None:
        job_id, token = lease.job.id, lease.lease_token
        if report.outcome == "ok":  # whoever holds the lease now: the first result wins
            self.reporter.complete(job_id, token, priced(report.value, self.config.price_per_gpu_hour))
        elif keeper.lost.is_set():
            log.warning("job %d: the lease was lost; the child was stopped and nothing is reported", job_id)
        elif keeper.cancel_requested.is_set():
            self.reporter.cancelled(job_id, token, priced(partial, self.config.price_per_gpu_hour))
        elif self.stopping:
            log.info("job %d: stopping; releasing the lease", job_id)
            self.api.release(job_id, token)
        else:
            self.reporter.fail(job_id, token, f"{report.outcome}: {report.error}", report.traceback)

    def deliver_saved_results(self) -> None:
        """Results an earlier run of this worker saved but could not report (see `Reporter.deliver_saved`)."""
        self.reporter.deliver_saved()
