"""Waits that grow: idle polling starts fast and backs off to a cap, and so do retries of a failing call."""

from __future__ import annotations


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
