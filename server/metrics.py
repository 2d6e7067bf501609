"""`GET /metrics` in the Prometheus text format, for viewer and admin tokens.

Every figure is read from the database when Prometheus scrapes, not counted in this process: several
server processes behind one database report the same numbers, and a restart loses nothing. What the
database does not record is not invented (a worker's last contact is the latest moment the queue saw
it: registration, a claim (also one that found no job: an idle worker polling for work is alive), a
heartbeat or a finished job).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from padbench.contract.api import JobStatus
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_specs
from padbench.server.api.auth_gate import METRICS_PATH
from padbench.server.api.deps import ViewerAuth
from padbench.server.db.clock import db_now
from padbench.server.db.engine import Database
from padbench.server.db.models import Job, JobRegression, JobResult, Worker
from padbench.server.queue import LEASE_EXPIRED_ERROR

router = APIRouter(tags=["metrics"])
# Queue waits run from seconds (an idle fleet) to days (a busy one); runs from a minute to hours.
DURATION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
# The child-process outcomes a worker reports as `outcome: detail` (see the worker's isolation module).
CHILD_OUTCOMES = ("oom", "cuda_error", "timeout", "crash", "error")
# Newest succeeded jobs read for the last tokens/s per (GPU, model, strategy, kernel).
RECENT_RESULTS = 200


def failure_reason(error: str | None) -> str:
    """A failed job's reason as one of a few fixed labels, so the metric's label set stays small."""
    text = error or ""
    if text == LEASE_EXPIRED_ERROR:
        return "lease_expired"
    prefix = text.split(":", 1)[0].strip()
    if prefix in CHILD_OUTCOMES:
        return prefix
    if text.startswith("the job's result does not match"):
        return "invalid_result"
    if text.startswith("the server rejected"):
        return "rejected_result"
    return "other"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else max(0.0, (end - start).total_seconds())


def _histogram(name: str, documentation: str, values: list[float]) -> HistogramMetricFamily:
    buckets = [(str(bound), float(sum(value <= bound for value in values))) for bound in DURATION_BUCKETS]
    buckets.append(("+Inf", float(len(values))))
    return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=sum(values))


class QueueCollector(Collector):
    """Reads the app's database (opened at start-up, after this collector is registered) on each scrape."""

    def __init__(self, app_state: Any) -> None:
        self.app_state = app_state

    def collect(self) -> Iterator[Any]:
        database: Database = self.app_state.database
        with database.read() as session:
            now = session.scalar(select(db_now()))
            assert now is not None
            yield from self._jobs(session)
            yield from self._durations(session)
            yield from self._workers(session, now)
            yield from self._kind_metrics(session)
            yield self._regressions(session)

    def _jobs(self, session: Session) -> Iterator[Any]:
        by_status = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
        jobs = GaugeMetricFamily("padbench_jobs", "Jobs in each status", labels=["status"])
        for job_status in JobStatus:
            jobs.add_metric([job_status.value], by_status.get(job_status.value, 0))
        yield jobs
        claims = session.scalar(select(func.coalesce(func.sum(Job.attempts), 0)))
        yield CounterMetricFamily("padbench_job_claims", "Claims of jobs by workers (attempts started)",
                                  value=float(claims or 0))
        failures = CounterMetricFamily("padbench_job_failures", "Failed jobs by reason", labels=["reason"])
        counts: dict[str, int] = {}
        for error in session.scalars(select(Job.error).where(Job.status == JobStatus.failed.value)):
            counts[failure_reason(error)] = counts.get(failure_reason(error), 0) + 1
        for reason, count in sorted(counts.items()):
            failures.add_metric([reason], count)
        yield failures

    def _durations(self, session: Session) -> Iterator[Any]:
        rows = session.execute(select(Job.created_at, Job.started_at, Job.finished_at)).all()
        waits = [wait for created, started, _ in rows if (wait := _seconds(created, started)) is not None]
        runs = [run for _, started, finished in rows if (run := _seconds(started, finished)) is not None]
        yield _histogram("padbench_job_queue_wait_seconds", "Seconds from submission to the latest claim", waits)
        yield _histogram("padbench_job_run_seconds", "Seconds from the latest claim to the end, finished jobs", runs)

    def _workers(self, session: Session, now: datetime) -> Iterator[Any]:
        # Claims (even those that found no job) and heartbeats set last_contact_at; a finished job's report does not.
        last_finished = dict(session.execute(
            select(Job.worker_id, func.max(Job.finished_at))
            .where(Job.worker_id.is_not(None)).group_by(Job.worker_id)).all())
        age = GaugeMetricFamily("padbench_worker_last_seen_age_seconds",
                                "Seconds since the worker's last claim, heartbeat, finished job or registration",
                                labels=["worker", "device", "gpu"])
        for worker in session.scalars(select(Worker)):
            moments = (worker.registered_at, worker.last_contact_at, last_finished.get(worker.id))
            latest = max(moment for moment in moments if moment is not None)
            capabilities = worker.capabilities or {}
            age.add_metric([worker.name, str(capabilities.get("device", "")), str(capabilities.get("gpu_name") or "")],
                           _seconds(latest, now) or 0.0)
        yield age

    @staticmethod
    def _regressions(session: Session) -> GaugeMetricFamily:
        """Jobs whose result was slower than a baseline's beyond noise when it was stored, per baseline."""
        gauge = GaugeMetricFamily("padbench_regressed_jobs", "Jobs whose result regressed against the baseline, "
                                  "as checked when the result was stored", labels=["baseline"])
        counts = session.execute(select(JobRegression.baseline, func.count()).where(JobRegression.regressed)
                                 .group_by(JobRegression.baseline).order_by(JobRegression.baseline))
        for baseline, count in counts:
            gauge.add_metric([baseline], count)
        return gauge

    @staticmethod
    def _recent_results(session: Session, kind: str) -> Iterator[JobResultBase]:
        documents = session.scalars(
            select(JobResult.result).join(Job, Job.id == JobResult.job_id)
            .where(Job.kind == kind).order_by(JobResult.job_id.desc()).limit(RECENT_RESULTS))
        for document in documents:
            try:
                yield JOB_RESULT_ADAPTER.validate_python(document)
            except ValidationError:  # stored under an older contract: skipped, not guessed at
                continue

    def _kind_metrics(self, session: Session) -> Iterator[GaugeMetricFamily]:
        """Each kind's gauges (its record's `metrics`), from its newest results: the newest figure per row."""
        for kind in kind_specs():
            if not kind.metrics:
                continue
            results = list(self._recent_results(session, kind.name))
            for metric in kind.metrics:
                gauge = GaugeMetricFamily(metric.name, metric.help, labels=list(metric.labels))
                seen: set[tuple[str, ...]] = set()
                for result in results:
                    for labels, value in metric.samples(result):
                        if labels not in seen:
                            seen.add(labels)
                            gauge.add_metric(list(labels), value)
                yield gauge


@router.get(METRICS_PATH, response_class=Response, summary="Prometheus metrics (viewer or admin token)")
def metrics(request: Request, principal: ViewerAuth) -> Response:
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def install_metrics(app: FastAPI) -> None:
    """Add `/metrics` with a registry of the app's own (two apps in one process never share figures)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(app.state))
    app.state.metrics_registry = registry
    app.include_router(router)
