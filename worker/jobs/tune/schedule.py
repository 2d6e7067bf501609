"""How long the tune's children take, so that the tune starts only what fits in its budget with the finalists'
measurement kept back.

A trial child's time is a fixed part (the child's start, the model build, the data, the correctness gate) and,
for each of its rows, a warm-up (a compiled row's compile included) and the measured batches. The finalists'
child pays the fixed part and the warm-ups again and measures `2 × first_round_batches` batches `repeats` times,
so the trials already run predict it. A group not yet run is estimated from the slowest of its kind (eager or
compiled) measured so far; a compiled group before any compiled one has run, from the eager ones: compiling only
adds to a trial's time, so that is a lower bound, and the first compiled trial runs whenever it could fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from padbench.worker.jobs.tune.trial_specs import JobSettings
from padbench.worker.jobs.tune.trials import Measured


@dataclass(frozen=True)
class RowTime:
    warmup_s: float
    batch_s: float  # measured seconds a batch

    def at(self, batches: int) -> float:
        return self.warmup_s + self.batch_s * batches


@dataclass
class Durations:
    """What each trial job and each configuration's row took, by the job settings it ran with."""

    final_batches: int  # the batches a finalist measures: 2 × first_round_batches, for each repeat
    jobs: dict[JobSettings, float] = field(default_factory=dict)  # each group's last trial job, start to end
    fixed: dict[JobSettings, float] = field(default_factory=dict)  # a group's child, less its rows
    rows: dict[int, RowTime] = field(default_factory=dict)  # by configuration index
    kinds: dict[int, bool] = field(default_factory=dict)  # each timed configuration: compiled or not

    @property
    def known(self) -> bool:
        return bool(self.fixed)

    def record(self, settings: JobSettings, seconds: float, rows: Mapping[int, Measured], batches: int) -> None:
        """A trial job of `settings` took `seconds`, start to end, measuring `rows` for `batches` batches each."""
        times = {index: RowTime(outcome.warmup_seconds or 0.0, (outcome.measured_seconds or 0.0) / batches)
                 for index, outcome in rows.items() if outcome.tokens_per_s is not None}
        self.jobs[settings] = seconds
        self.fixed[settings] = max(seconds - sum(time.at(batches) for time in times.values()), 0.0)
        self.rows |= times
        self.kinds |= dict.fromkeys(times, _compiled(settings))

    def group(self, settings: JobSettings, members: Iterable[int], batches: int) -> float:
        """The estimated seconds of one trial job of `settings` measuring `members` for `batches` batches each."""
        compiled = _compiled(settings)
        fixed = self.fixed.get(settings, self._slowest_fixed(compiled))
        fallback = self._slowest_row(compiled)
        return fixed + sum(self.rows.get(index, fallback).at(batches) for index in members)

    def finals(self, members: Mapping[JobSettings, list[int]]) -> float:
        """The estimated seconds of the finalists' jobs: one a group of job settings."""
        return sum(self.group(settings, indices, self.final_batches) for settings, indices in members.items())

    def _slowest_fixed(self, compiled: bool) -> float:
        same = [seconds for settings, seconds in self.fixed.items() if _compiled(settings) == compiled]
        return max(same or [seconds for settings, seconds in self.fixed.items() if not _compiled(settings)] or [0.0])

    def _slowest_row(self, compiled: bool) -> RowTime:
        same = [time for index, time in self.rows.items() if self.kinds[index] == compiled]
        chosen = same or [time for index, time in self.rows.items() if not self.kinds[index]]
        if not chosen:
            return RowTime(0.0, 0.0)
        return RowTime(max(time.warmup_s for time in chosen), max(time.batch_s for time in chosen))


def _compiled(settings: JobSettings) -> bool:
    return settings[0]
