"""The worker's main loop: register, claim, run the job in a spawned child, heartbeat, report.

The parent never imports torch: the job runs through `run_in_child` (spawned, own process group, a
wall-clock limit), and everything the parent does is HTTP. How each run ends decides the one call made
to the server: a result → `complete`, whatever became of the lease meanwhile (the server takes the first
result from any of the job's attempts); a crash, OOM, error or timeout → `fail` with the child's error and
traceback; a cancel seen on a heartbeat → `cancelled` with the rows the job finished, marked partial (or,
with none, `fail` saying so: the server records it as cancelled either way); a stop request (SIGTERM) →
`release`, so another worker takes the job at once. A heartbeat answered "the job ended" stops the child
and nothing is reported; one answered "another worker's lease holds the job" leaves the child running,
since its result may still be the first (see `lease.py`).

A finished result is worth a GPU run, so it is saved in the outbox before it is reported, and reported
until the server answers for good (see `reporting.py`); a result still unreported when the worker stops
is delivered when it starts again.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from padbench.contract.api import Capabilities, LeaseOut
from padbench.http import ApiError, jittered_wait
from padbench.worker.runtime.isolation import ChildReport, run_in_child
from padbench.worker.runtime.settings import DEFAULT_JOB_TIMEOUT_S
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from padbench.worker.supervisor.capabilities import gpu_environment
from padbench.worker.supervisor.confine import PathRefused, confine_spec_paths
from padbench.worker.supervisor.lease import LeaseKeeper
from padbench.worker.supervisor.outbox import Outbox
from padbench.worker.supervisor.reporting import Reporter, Retrying

log = logging.getLogger("padbench.worker")

HTTP_UNAUTHORIZED = 401
HTTP_FORBIDDEN = 403


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    gpu: str | None = None
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


class Backoff:
    def __init__(self, first_s: float, max_s: float) -> None:
        self.first_s, self.max_s = first_s, max_s
        self._next = first_s

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.max_s)
        return delay

    def reset(self) -> None:
        self._next = self.first_s


class LatestPartial:
    """The last partial result the job's child handed over (`ctx.finished`): the rows a cancel keeps."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] | None = None

    def keep(self, document: Any) -> None:
        self.latest = document


class FatalWorkerError(RuntimeError):
    """The server refuses this worker outright (bad token, wrong role): retrying cannot help."""


class Supervisor:
    def __init__(
        self,
        api: WorkerApi,
        config: WorkerConfig,
        capabilities: Capabilities,
        stop_event: threading.Event | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.capabilities = capabilities
        self.worker_id: int | None = None
        self.jobs_run = 0
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
        idle = Backoff(self.config.idle_poll_first_s, self.config.idle_poll_max_s)
        while not self.stopping:
            lease = self._claim()
            if lease is None:
                self._stop.wait(idle.next())
                continue
            idle.reset()
            self.run_lease(lease)
            self.jobs_run += 1
            if self.config.once:
                return

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
            return self.api.claim(self.worker_id)
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

    def run_lease(self, lease: LeaseOut) -> ChildReport:
        job = lease.job
        log.info("job %d (%s) claimed, attempt %d of %d", job.id, job.kind, job.attempts, job.max_attempts)
        # The keeper stays on while the report is retried: its heartbeats keep the lease alive meanwhile.
        partials = LatestPartial()
        with LeaseKeeper(self.api, lease) as keeper:
            try:
                spec = confine_spec_paths(job.spec, self.config.data_roots, self.config.model_roots)
            except PathRefused as refused:
                report = ChildReport(outcome="error", error=str(refused))
            else:
                report = self._run_child(spec, keeper, partials)
            log.info("job %d: child finished: %s in %.1f s", job.id, report.outcome, report.seconds)
            try:
                self._settle(lease, report, keeper, partials.latest)
            except LeaseLost as error:
                log.warning("job %d: the server takes no report under this lease now (%s)", job.id, error)
            except ApiError as error:
                # Only a stop request or a refusal ends the retries; a saved result is offered again at the next start.
                log.error("job %d: could not report to the server: %s", job.id, error)
        return report

    def _run_child(self, spec: dict[str, Any], keeper: LeaseKeeper, partials: LatestPartial) -> ChildReport:
        with tempfile.TemporaryDirectory(prefix="padbench-job-") as workdir:  # empty, private: see confine
            return run_in_child(
                self.config.job_target,
                spec,
                timeout_s=self.config.job_timeout_s,
                memory_cap_bytes=self.config.job_memory_cap_bytes,
                env=gpu_environment(self.config.gpu),
                on_progress=keeper.update,
                on_finished=partials.keep,
                should_stop=lambda: self.stopping or keeper.cancel_requested.is_set() or keeper.lost.is_set(),
                workdir=workdir,
            )

    def _settle(self, lease: LeaseOut, report: ChildReport, keeper: LeaseKeeper,
                partial: dict[str, Any] | None) -> None:
        job_id, token = lease.job.id, lease.lease_token
        if report.outcome == "ok":  # whoever holds the lease now: the first result wins
            self.reporter.complete(job_id, token, report.value)
        elif keeper.lost.is_set():
            log.warning("job %d: the job ended elsewhere; the child was stopped", job_id)
        elif keeper.superseded.is_set():
            log.warning("job %d: %s, and another worker's lease holds the job: its run decides; nothing reported",
                        job_id, report.outcome)
        elif keeper.cancel_requested.is_set():
            self.reporter.cancelled(job_id, token, partial)
        elif self.stopping:
            log.info("job %d: stopping; releasing the lease", job_id)
            self.api.release(job_id, token)
        else:
            self.reporter.fail(job_id, token, f"{report.outcome}: {report.error}", report.traceback)

    def deliver_saved_results(self) -> None:
        """Results an earlier run of this worker saved but could not report (see `Reporter.deliver_saved`)."""
        self.reporter.deliver_saved()
