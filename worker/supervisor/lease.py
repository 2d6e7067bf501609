"""Keeping one lease alive while its job runs: a heartbeat thread in the supervisor parent.

The thread beats every ~lease/3 seconds so one lost request does not cost the lease, and sooner (at most
once a second) when the child reports new progress, so people watching `padbench wait` see it promptly
and a cancel is noticed within about a second of the next progress report (a gang member's beats carrying the
job's progress are paced the same way: `LatestProgress`, `wait_for_beat`). What the server answers is
kept in flags the run loop polls: `cancel_requested`, and `lost` (409: the job ended elsewhere, or the
lease was missed past the server's grace and the job went to another worker), on which the child is
stopped at once: a job never runs on two workers. A beat the server does not answer is no loss: the next
may get through, and a lease past its deadline is extended, or resumed, as long as nobody else took the job.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from padbench.contract.api import LeaseOut
from padbench.http import ApiError
from padbench.worker.supervisor.api import LeaseLost, WorkerApi

log = logging.getLogger("padbench.worker")

# Bounds on the heartbeat period: frequent enough that a cancel is seen within ~10 s even on a long
# lease, and never so frequent that a tiny lease in a test hammers the server.
MIN_BEAT_INTERVAL_S = 0.2
MAX_BEAT_INTERVAL_S = 10.0
MIN_PROGRESS_GAP_S = 1.0


def beat_interval(lease: LeaseOut, now: datetime | None = None) -> float:
    """A third of the lease the server granted (its clock decides the expiry; we only need its length)."""
    return interval_until(lease.lease_expires_at, now)


def interval_until(expires: datetime, now: datetime | None = None) -> float:
    """A third of the time left until `expires` (a lease's or a gang membership's), within the bounds."""
    now = now or datetime.now(timezone.utc)
    if expires.tzinfo is None:  # SQLite may hand back naive UTC timestamps
        expires = expires.replace(tzinfo=timezone.utc)
    length = (expires - now).total_seconds()
    return min(max(length / 3, MIN_BEAT_INTERVAL_S), MAX_BEAT_INTERVAL_S)


class LatestProgress:
    """The latest progress a job's child reported, for the next beat to carry. `wake` is set when it changes,
    so the thread that beats (a lease's, or a gang membership's) beats soon: see `wait_for_beat`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: tuple[float | None, str | None] = (None, None)
        self.wake = threading.Event()

    def update(self, fraction: float, message: str) -> None:
        """`on_progress` for run_in_child: remember the latest progress and nudge the beating thread."""
        with self._lock:
            self._value = (min(max(fraction, 0.0), 1.0), message[:2000] or None)
        self.wake.set()

    def latest(self) -> tuple[float | None, str | None]:
        with self._lock:
            return self._value


def wait_for_beat(progress: LatestProgress, done: threading.Event, last_beat: float, interval_s: float) -> bool:
    """Wait until the next beat is due: `interval_s` after the last one (`time.monotonic()`), or sooner when
    progress arrived, but not sooner than MIN_PROGRESS_GAP_S after it. False when `done` was set meanwhile
    (whoever sets it sets `progress.wake` too, so the wait ends at once)."""
    woken = progress.wake.wait(timeout=max(0.0, last_beat + interval_s - time.monotonic()))
    if done.is_set():
        return False
    if woken:  # progress arrived: beat now, but not more than once a second
        progress.wake.clear()
        done.wait(timeout=max(0.0, last_beat + MIN_PROGRESS_GAP_S - time.monotonic()))
    return not done.is_set()


class LeaseKeeper:
    def __init__(self, api: WorkerApi, lease: LeaseOut, interval_s: float | None = None) -> None:
        self._api = api
        self.job_id = lease.job.id
        self.token = lease.lease_token
        self.interval_s = interval_s if interval_s is not None else beat_interval(lease)
        self.cancel_requested = threading.Event()
        self.lost = threading.Event()
        self.beats = 0
        self._progress = LatestProgress()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.job_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._progress.wake.set()
        self._thread.join(timeout=30)

    def update(self, fraction: float, message: str) -> None:
        """`on_progress` for run_in_child: remember the latest progress and nudge the heartbeat thread."""
        self._progress.update(fraction, message)

    def _run(self) -> None:
        last_beat = time.monotonic()
        while not self.lost.is_set() and wait_for_beat(self._progress, self._done, last_beat, self.interval_s):
            self.beat()
            last_beat = time.monotonic()

    def beat(self) -> None:
        if self.lost.is_set():
            return  # the server said no already; beating on would only ask again
        progress, message = self._progress.latest()
        try:
            ack = self._api.heartbeat(self.job_id, self.token, progress, message)
        except LeaseLost as error:
            self._lost(error)
            return
        except ApiError as error:  # transient: the next beat may get through before the lease ends
            log.warning("job %d: heartbeat failed: %s", self.job_id, error)
            return
        self.beats += 1
        if ack.cancel_requested and not self.cancel_requested.is_set():
            log.info("job %d: cancel requested", self.job_id)
            self.cancel_requested.set()

    def _lost(self, error: LeaseLost) -> None:
        where = "the job ended elsewhere" if error.job_ended else "another worker holds the job now"
        log.warning("job %d: lease lost, %s (%s); stopping its run", self.job_id, where, error)
        self.lost.set()
