"""The submitter's client for the padbench API (`/v1`): typed bodies in, typed bodies out.

Failures are `padbench.http.ApiError`s: one line a person can act on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from padbench.contract.api import (
    IDEMPOTENCY_KEY_HEADER,
    JobCreated,
    JobOut,
    JobPage,
    JobsPruned,
    JobStatus,
    WorkerOut,
)
from padbench.contract.history import BaselineOut, Histories, History, RegressionCheck
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.http import ApiError, ApiSession, parse_body

WORKERS_ADAPTER = TypeAdapter(list[WorkerOut])
BASELINES_ADAPTER = TypeAdapter(list[BaselineOut])


class PadbenchClient(ApiSession):
    """Submit, inspect, wait for, read and cancel jobs; list workers and prune old jobs (admins)."""

    def submit(self, spec_document: dict[str, Any], *, idempotency_key: str | None = None) -> JobCreated:
        """Queue a job. The request carries an `Idempotency-Key` (a fresh UUID unless given): when the session
        sends it again after an answer was lost, the server returns the job the first attempt created."""
        headers = {IDEMPOTENCY_KEY_HEADER: idempotency_key or str(uuid.uuid4())}
        return parse_body(JobCreated, self.request("POST", "/jobs", json={"spec": spec_document}, headers=headers))

    def job(self, job_id: int) -> JobOut:
        return parse_body(JobOut, self.request("GET", f"/jobs/{job_id}"))

    def jobs(self, *, status: JobStatus | None = None, limit: int = 50, offset: int = 0) -> JobPage:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status is not None:
            params["status"] = status.value
        return parse_body(JobPage, self.request("GET", "/jobs", params=params))

    def results(self, job_id: int) -> JobResultBase:
        response = self.request("GET", f"/jobs/{job_id}/results")
        try:
            return JOB_RESULT_ADAPTER.validate_json(response.content)
        except ValidationError as error:
            raise ApiError(f"job {job_id}'s stored result does not match the result contract: {error}") from error

    def history(self, fingerprint: str) -> History:
        """Every stored row of this fingerprint the token may read, oldest first."""
        return parse_body(History, self.request("GET", f"/history/{fingerprint}"))

    def job_history(self, job_id: int) -> Histories:
        """The history of every row of the job's result."""
        return parse_body(Histories, self.request("GET", "/history", params={"job": job_id}))

    def set_baseline(self, name: str, job_id: int) -> BaselineOut:
        """Name the job's result `name` (created, or moved from the job it named before)."""
        return parse_body(BaselineOut, self.request("PUT", f"/baselines/{name}", json={"job_id": job_id}))

    def baselines(self) -> list[BaselineOut]:
        response = self.request("GET", "/baselines")
        try:
            return BASELINES_ADAPTER.validate_json(response.content)
        except ValidationError as error:
            raise ApiError(f"the server's baseline list does not match the BaselineOut contract: {error}") from error

    def check_baseline(self, name: str, job_id: int, tolerance: float) -> RegressionCheck:
        """The job's rows against the baseline's of the same fingerprint."""
        params = {"job": job_id, "tolerance": tolerance}
        return parse_body(RegressionCheck, self.request("GET", f"/baselines/{name}/check", params=params))

    def workers(self) -> list[WorkerOut]:
        """Every registered worker: capabilities, last contact and running job (admin or viewer tokens)."""
        response = self.request("GET", "/workers")
        try:
            return WORKERS_ADAPTER.validate_json(response.content)
        except ValidationError as error:
            raise ApiError(f"the server's worker list does not match the WorkerOut contract: {error}") from error

    def cancel(self, job_id: int) -> JobOut:
        return parse_body(JobOut, self.request("POST", f"/jobs/{job_id}/cancel"))

    def prune(self, older_than_days: int) -> JobsPruned:
        """Remove jobs that finished more than `older_than_days` ago, with their results (admin tokens only)."""
        return parse_body(JobsPruned, self.request("POST", "/jobs/prune", json={"older_than_days": older_than_days}))

    def wait(
        self,
        job_id: int,
        *,
        on_update: Callable[[JobOut], None] | None = None,
        poll_s: float = 0.5,
        timeout_s: float | None = None,
        outage_s: float = 60.0,
    ) -> JobOut:
        """Poll until the job reaches a final status; `on_update` sees every poll (for a progress bar).

        A server that is briefly unreachable or answers 5xx (a restart, say) is waited out for up to
        `outage_s`; any other error, or a longer outage, is raised.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        outage_started: float | None = None
        while True:
            try:
                job = self.job(job_id)
            except ApiError as error:
                if not error.is_transient:
                    raise
                outage_started = outage_started or time.monotonic()
                if time.monotonic() - outage_started > outage_s:
                    raise
                time.sleep(poll_s)
                continue
            outage_started = None
            if on_update is not None:
                on_update(job)
            if job.status.is_final:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                # Only the waiting ends: the job stays queued or running on the service.
                raise ApiError(f"stopped waiting after {timeout_s:g} s: job {job_id} is still {job.status.value} "
                               f"and goes on without this command (`padbench wait {job_id}` follows it again, "
                               f"`padbench cancel {job_id}` stops it)")
            time.sleep(poll_s)
