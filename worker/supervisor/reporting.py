"""Reporting how a job's run ended, retried until the server answers for good.

A finished result is worth a GPU run. It is saved in the outbox before it is reported, and reported until
the server answers for good: 204 (stored), 409 (another attempt's result came first, or the job was
cancelled: nothing more to do) or another 4xx (refused: the job is failed with the reason). No answer, a
5xx or a 429 is tried again after a growing, jittered delay (or as long as the server's Retry-After
says) for as long as it takes: the server takes a result from any of the job's attempts, so neither the
clock nor a lost heartbeat makes it worthless. Only a stop request ends the retries early; the result
then stays in the outbox and is offered again, a bounded number of times, when the worker next starts.

A job across several workers reports its result the same way, through the gang route: under the membership
of the member whose node ran global rank 0, which the server takes as a report under that attempt's lease,
even once the attempt ended. Only a refusal cannot fail the job there (a membership reports no failure):
it is logged, and without a result the attempt's lease lapses and the job is requeued.
"""

from __future__ import annotations

import functools
import itertools
import logging
import random
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from padbench.contract.api import LeaseComplete
from padbench.contract.gangs import GangComplete
from padbench.http import ApiError, stretched_retry_after
from padbench.worker.runtime.kernel_evidence import record_result
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.supervisor.api import LeaseLost, WorkerApi
from padbench.worker.supervisor.outbox import Outbox, PendingResult, ReportRoute

log = logging.getLogger("padbench.worker")

HTTP_TOO_MANY_REQUESTS = 429
FIRST_RETRY_S = 0.5
# A Retry-After beyond this is a misconfigured proxy's, not a plan: the report is tried again sooner.
MAX_RETRY_AFTER_S = 600.0
# A saved result is offered this many times at start-up; one the server cannot take yet waits for the next.
SAVED_RESULT_TRIES = 5


def worth_retrying(error: ApiError) -> bool:
    """No answer, a server error or "too many requests": the same report may well be taken later."""
    return error.is_transient or error.status == HTTP_TOO_MANY_REQUESTS



def priced(document: Any, price_per_gpu_hour: float | None) -> Any:
    """The result document with the worker's price stamped on its environment (unchanged without a price, or
    for a document that is not a result: the server's validation then says what is wrong with it)."""
    if price_per_gpu_hour is None or not isinstance(document, dict) or not isinstance(document.get("environment"),
                                                                                    dict):
        return document
    return {**document, "environment": {**document["environment"], "price_per_gpu_hour": price_per_gpu_hour}}

class Retrying:
    """Runs a report until the server answers for good.

    `wait(seconds)` waits between tries and returns True when the worker is stopping (the signature of
    `threading.Event.wait`); `jitter()` is a number in [0, 1) that spreads the delays of many workers
    retrying against one recovering server.
    """

    def __init__(self, wait: Callable[[float], bool], max_delay_s: float,
                 jitter: Callable[[], float] = random.random) -> None:
        self.wait = wait
        self.max_delay_s = max_delay_s
        self.jitter = jitter

    def delay(self, failures: int, error: ApiError) -> float:
        """How long to wait after the `failures`-th failed try: the server's Retry-After where it sent one
        (stretched by up to half again, so workers told the same wait do not return in step), else
        exponential back-off with "equal jitter" (half fixed, half random: never zero, never in step)."""
        if error.retry_after is not None:
            return min(stretched_retry_after(error.retry_after, self.jitter()), MAX_RETRY_AFTER_S)
        ceiling = min(FIRST_RETRY_S * 2.0 ** min(failures - 1, 30), self.max_delay_s)
        return ceiling / 2 + ceiling / 2 * self.jitter()

    def run(self, call: Callable[[], Any], *, what: str, tries: int | None = None) -> None:
        """`call()` until it returns or fails for good; the last error is raised once `tries` are spent
        (None: never) or the worker is stopping."""
        for failures in itertools.count(1):
            try:
                call()
                return
            except ApiError as error:
                if not worth_retrying(error) or (tries is not None and failures >= tries):
                    raise
                delay = self.delay(failures, error)
                log.warning("%s: reporting failed (%s); trying again in %.1f s", what, error, delay)
                if self.wait(delay):
                    raise


class Reporter:
    """The reports a run ends with: its result, the rows a cancel kept, or its failure."""

    def __init__(self, api: WorkerApi, outbox: Outbox | None, retrying: Retrying) -> None:
        self.api = api
        self.outbox = outbox
        self.retrying = retrying

    def complete(self, job_id: int, token: str, result: Any, route: ReportRoute = ReportRoute.LEASE) -> None:
        """Report the result under `token` (the lease, or on the gang route the member's token); raises the
        last ApiError only when the worker stops before the server answered."""
        try:
            # Checked here, before anything is sent: a result that is not valid JSON for the contract (NaN,
            # a wrong type) fails the job with the reason instead of escaping the loop.
            _validated(route, token, result)
        except (ValidationError, ValueError, TypeError) as error:
            self._refused(job_id, token, route, f"the job's result does not match the result contract: {error}")
            return
        # Its rows were measured on this machine whatever the server answers: `attention: auto` reads them.
        record_result(result, f"job {job_id}", WorkerSettings().kernel_speeds_path)
        if self.outbox is not None:
            self.outbox.save(PendingResult(job_id, token, result, route))
        try:
            self.retrying.run(functools.partial(self._sender(route), job_id, token, result),
                              what=f"job {job_id}'s result")
        except LeaseLost as error:
            log.warning("job %d: the server keeps another attempt's result, or the job ended otherwise (%s); "
                        "this one is dropped", job_id, error)
        except ApiError as error:
            if worth_retrying(error):
                raise  # stopping: the outbox keeps the result for the next start
            self._forget(job_id)
            self._refused(job_id, token, route, f"the server rejected the job's result: {error}")
            return
        else:
            log.info("job %d: result reported", job_id)
        self._forget(job_id)

    def _sender(self, route: ReportRoute) -> Callable[[int, str, dict[str, Any]], None]:
        """The API call that reports a result on `route`."""
        return self.api.complete_gang if route is ReportRoute.GANG else self.api.complete

    def _refused(self, job_id: int, token: str, route: ReportRoute, reason: str) -> None:
        """A result that cannot be stored fails the job with the reason, where the token may fail it: a
        membership may not, so on the gang route the reason is logged and the attempt's lease lapses."""
        if route is ReportRoute.GANG:
            log.error("job %d: the result was not reported: %s", job_id, reason)
            return
        self.fail(job_id, token, reason, None)

    def cancelled(self, job_id: int, token: str, partial: dict[str, Any] | None) -> None:
        """Stopped on a cancel: the rows the job finished go to the server, marked partial. Without rows, or
        with rows the server refuses outright, the job just ends cancelled."""
        if partial is not None:
            try:
                self.retrying.run(lambda: self.api.cancelled(job_id, token, partial),
                                  what=f"job {job_id}'s finished rows")
                return
            except ValidationError as error:
                log.error("job %d: the finished rows do not match the result contract (%s)", job_id, error)
            except ApiError as error:
                if worth_retrying(error) or isinstance(error, LeaseLost):
                    raise
                log.error("job %d: the server refused the finished rows (%s)", job_id, error)
        self.fail(job_id, token, "cancelled on request; the job's child process was stopped", None)

    def fail(self, job_id: int, token: str, error: str, traceback: str | None) -> None:
        self.retrying.run(lambda: self.api.fail(job_id, token, error, traceback), what=f"job {job_id}'s failure")

    def deliver_saved(self) -> None:
        """Results an earlier run of this worker could not report: each is offered again a few times, and
        kept for the next start when the server still cannot take it."""
        if self.outbox is None or not self.outbox.directory.is_dir():
            return
        for pending in self.outbox.pending():
            send = functools.partial(self._sender(pending.route), pending.job_id, pending.token, pending.result)
            try:
                self.retrying.run(send, what=f"job {pending.job_id}'s saved result", tries=SAVED_RESULT_TRIES)
            except ApiError as error:
                if worth_retrying(error):
                    log.warning("job %d: saved result not delivered yet (%s); kept", pending.job_id, error)
                    continue
                log.warning("job %d: saved result not taken (%s); dropping it", pending.job_id, error)
            except ValidationError as error:
                log.error("job %d: saved result no longer matches the contract (%s)", pending.job_id, error)
            else:
                log.info("job %d: saved result delivered", pending.job_id)
            self.outbox.remove(pending.job_id)

    def _forget(self, job_id: int) -> None:
        if self.outbox is not None:
            self.outbox.remove(job_id)


def _validated(route: ReportRoute, token: str, result: Any) -> str:
    """The report's body as JSON, checked against the contract of its route."""
    if route is ReportRoute.GANG:
        return GangComplete.model_validate({"member_token": token, "result": result}).model_dump_json()
    return LeaseComplete.model_validate({"lease_token": token, "result": result}).model_dump_json()
