"""A sample taken beside a running measurement: once at the start, every interval on a daemon thread, and
once at the stop, so even a run shorter than one interval has its first and last state."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Poller:
    def __init__(self, sample: Callable[[], None], interval_s: float, name: str) -> None:
        self._sample, self._interval = sample, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name=name, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def start(self) -> None:
        self._sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
