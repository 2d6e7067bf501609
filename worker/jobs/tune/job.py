"""A tune: the configurations of its space that the memory plan lets through, narrowed by successive halving
(Jamieson and Talwalkar, 2016; Li et al., Hyperband, 2018) within the time budget, the finalists then measured
in full with repeats.

Round r measures every surviving configuration for `first_round_batches · 2^r` batches and keeps the faster half
(never fewer than the finalists); it stops when the finalists remain or the next round would not fit in what
the budget leaves after the finalists' measurement. Compiling a configuration costs tens of seconds before its
first step, so where the space holds both, the first round measures eager configurations first, then the
compiled twins of the fastest of them (as many as the finalists), at the same batch count: compiling makes each
step faster by a similar factor across layouts and batch sizes, so the eager ranking picks which are worth
compiling. The twins are part of the first round, not of a later one the budget may leave no room for: a large
model's trial is mostly its child's start and model build, so one round can take most of the budget, and a
tune must not answer eager only because compiling was never tried.

Nothing starts that would not fit in what the budget leaves with the finalists' measurement kept back, by the
times of the trials already run (`schedule.py`): a tune answers within its budget, and what it left out says so.

Every configuration stays in the result with its fate: pruned by the plan (and why), stopped in a round (and its
figure there), failed (and the error), or not reached when the budget ran out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.tune.contract import Finalist, TimeSpent, TuneJobSpec, TuneResult, TuneTrial
from padbench.worker.jobs import PartialFn
from padbench.worker.jobs.tune.equivalents import equivalents
from padbench.worker.jobs.tune.memory import available_bytes, planner
from padbench.worker.jobs.tune.schedule import Durations
from padbench.worker.jobs.tune.space import configurations, worker_families
from padbench.worker.jobs.tune.trial_specs import JobSettings, grouped, job_settings
from padbench.worker.jobs.tune.trials import Measured, TrialRunner
from padbench.worker.runtime.progress import ProgressFn

# A finalists' group may run past the budget by this much at least, and by its last trial's time for each repeat:
# the schedule keeps their time back, but an estimate can fall short, and a finalist cut off mid-measurement would
# leave the tune without the figure it exists for (the result states the tune's own wall time).
FINAL_MIN_S = 120.0


class Clock:
    def __init__(self, budget_s: float) -> None:
        self.start, self.budget_s = time.monotonic(), budget_s

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def left(self) -> float:
        return max(self.budget_s - self.elapsed, 0.0)

    def fraction(self) -> float:
        return min(self.elapsed / self.budget_s, 0.99)


class NoConfiguration(ValueError):
    """The tune's space yields nothing this worker can run: the job fails saying so, instead of measuring nothing."""


class Tune:
    def __init__(self, spec: TuneJobSpec, progress: ProgressFn, on_partial: PartialFn, kernel_names: list[str]):
        self.spec, self.progress, self.on_partial = spec, progress, on_partial
        self.clock = Clock(spec.tune.budget)
        self.runner = TrialRunner(spec, lambda message: progress(self.clock.fraction(), message))
        configs = configurations(spec, worker_families(kernel_names, spec.mode), self.runner.ranks())
        if not configs:  # a submitted spec names kernels that run in its dtype; the worker's own may not
            raise NoConfiguration(f"no configuration of tune.space runs here in {spec.dtype}: this worker's "
                                  f"attention kernels ({', '.join(kernel_names) or 'none'}) need another dtype")
        self.trials = [TuneTrial(config=config, fate="not reached", reason="the budget ran out first")
                       for config in configs]
        self.memory: int | None = None
        self.durations = Durations(final_batches=2 * spec.tune.first_round_batches * spec.tune.repeats)
        self.spent = TimeSpent()

    def run(self) -> TuneResult:
        alive = self.prune()
        deferred = self.deferred_compiles(alive)
        alive = self.halve([index for index in alive if index not in deferred], deferred)
        finalists = self.finals(alive)
        return self.result(finalists, partial=None)

    # --- before anything runs ------------------------------------------------------------------------------
    def prune(self) -> list[int]:
        self.memory = available_bytes(self.spec)
        plans = planner(self.spec, self.runner.ranks())
        alive = []
        for index, trial in enumerate(self.trials):
            fit = plans.fit(trial.config, self.memory)
            update: dict[str, object] = {"planned_bytes": fit.needed}
            if fit.fits:
                alive.append(index)
            else:
                update |= {"fate": "pruned", "reason": fit.reason()}
            self.trials[index] = trial.model_copy(update=update)
        self.progress(0.0, f"{len(self.trials)} configurations, {len(self.trials) - len(alive)} pruned by the memory "
                           f"plan; {len(alive)} to try in {self.spec.tune.budget:.0f} s")
        return alive

    def deferred_compiles(self, alive: list[int]) -> set[int]:
        """The compiled configurations left out of the first round: all of them when the space has eager ones."""
        if False not in self.spec.tune.space.compile:
            return set()
        return {index for index in alive if self.trials[index].config.compile}

    def admit_compiles(self, eager: list[int], deferred: set[int]) -> list[int]:
        """The compiled twins of the fastest eager configurations measured in the first round."""
        leaders = [self.trials[index].config.model_copy(update={"compile": True}).label for index in
                   self.rank(eager)[:self.spec.tune.finalists]]
        by_label = {self.trials[index].config.label: index for index in deferred}
        # in the order of their eager twins, fastest first: the budget may leave room for the first only
        admitted = [by_label[label] for label in leaders if label in by_label]
        for index in deferred - set(admitted):
            self.trials[index] = self.trials[index].model_copy(update={
                "fate": "stopped", "reason": f"round 1: its eager twin was not among the {self.spec.tune.finalists} "
                                            "fastest, which alone are tried compiled (each compile costs tens of "
                                            "seconds)"})
        return admitted

    # --- rounds ---------------------------------------------------------------------------------------------
    def halve(self, alive: list[int], deferred: set[int]) -> list[int]:
        finalists = self.spec.tune.finalists
        batches = self.spec.tune.first_round_batches
        alive = self.first_round(alive, deferred, batches)
        for number in range(2, 64):
            if len(alive) <= finalists:
                return alive
            if self.next_round_s(alive, batches * 2) + self.finals_s(self.rank(alive)) > self.clock.left:
                break
            batches *= 2
            alive = self.keep_faster(number, self.round(number, alive, batches))
        ranked = self.rank(alive)
        for index in ranked[finalists:]:
            self.trials[index] = self.trials[index].model_copy(update={
                "fate": "stopped", "reason": f"the budget left no room for another round; not among the {finalists} "
                                            "fastest"})
        return ranked[:finalists]

    def first_round(self, alive: list[int], deferred: set[int], batches: int) -> list[int]:
        """Every configuration the plan let through, eager ones first and then the compiled twins of the fastest,
        all for `batches` batches; the faster half of them (never fewer than the finalists) goes on."""
        measured = self.round(1, alive, batches)
        if deferred:
            measured += self.round(1, self.admit_compiles(measured, deferred), batches, "compiled twins: ")
        return self.keep_faster(1, self.rank(measured))

    def round(self, number: int, alive: list[int], batches: int, what: str = "") -> list[int]:
        """Measures `alive` for `batches` batches each: the configurations with a figure, fastest first (a group
        the budget left out keeps its figure from the round before)."""
        measured: dict[int, Measured] = {}
        carried: list[int] = []  # left out for the budget, but with a figure from an earlier round to rank by
        for settings, members in grouped(alive, [trial.config for trial in self.trials], self.spec.mode).items():
            if not self.fits(settings, members, batches):
                carried += [index for index in members if self.trials[index].tokens_per_s is not None]
                continue
            self.progress(self.clock.fraction(), f"round {number}: {what}{len(members)} configurations, {batches} "
                                                 f"batches each ({self.trials[members[0]].config.label})")
            started = time.monotonic()
            rows = self.runner.measure([self.trials[index].config for index in members], batches, 1,
                                       self.clock.left, lambda: self.clock.left <= 0)
            seconds = time.monotonic() - started
            self.spent = self.spent.with_trial_job(seconds)
            self.durations.record(settings, seconds, dict(zip(members, rows, strict=True)), batches)
            for index, outcome in zip(members, rows, strict=True):
                measured[index] = outcome
                self.record(index, outcome, number)
            self.report_partial()  # a tune stopped outright keeps every trial measured so far
        return self.rank([index for index in measured if measured[index].tokens_per_s is not None] + carried)

    # --- what fits in the budget ----------------------------------------------------------------------------
    def fits(self, settings: JobSettings, members: list[int], batches: int) -> bool:
        """Whether a trial job fits in what the budget leaves with the finalists' measurement kept back (the
        finalists it might join included); the tune's first job runs whatever its time, as nothing is known
        before it. One that does not fit is left out, saying so."""
        if not self.durations.known:
            return self.clock.left > 0
        trial_s = self.durations.group(settings, members, batches)
        finals_s = self.finals_s(self.rank(self.measured()), members)
        if trial_s + finals_s <= self.clock.left:
            return True
        for index in members:
            self.trials[index] = self.trials[index].model_copy(update={
                "fate": "not reached", "reason": f"the {self.clock.left:.0f} s the budget left could not hold its "
                                                 f"trial (about {trial_s:.0f} s) and the finalists' measurement "
                                                 f"(about {finals_s:.0f} s)"})
        return False

    def next_round_s(self, alive: list[int], batches: int) -> float:
        configs = [trial.config for trial in self.trials]
        return sum(self.durations.group(settings, members, batches)
                   for settings, members in grouped(alive, configs, self.spec.mode).items())

    def finals_s(self, ranked: list[int], candidates: Sequence[int] = ()) -> float:
        """The finalists' measurement as it stands (the fastest measured), or, where a candidate may displace one,
        whichever of them would take longest."""
        pool = ranked[:self.spec.tune.finalists] + list(candidates)
        configs = [trial.config for trial in self.trials]

        def alone(index: int) -> float:
            return self.durations.finals({self.settings_of(index): [index]})

        chosen = sorted(pool, key=alone, reverse=True)[:self.spec.tune.finalists]
        return self.durations.finals(grouped(chosen, configs, self.spec.mode))

    def measured(self) -> list[int]:
        return [index for index, trial in enumerate(self.trials) if trial.tokens_per_s is not None]

    def keep_faster(self, number: int, ranked: list[int]) -> list[int]:
        """The faster half of a round's configurations (never fewer than the finalists); the rest stop there."""
        kept = ranked[:max(self.spec.tune.finalists, math.ceil(len(ranked) / 2))]
        for index in ranked[len(kept):]:
            best = self.trials[kept[-1]].tokens_per_s
            self.trials[index] = self.trials[index].model_copy(update={
                "fate": "stopped", "reason": f"round {number}: slower than the half kept (the slowest kept ran "
                                            f"{best:,.0f} tokens/s)"})
        return kept

    def record(self, index: int, outcome: Measured, number: int) -> None:
        trial = self.trials[index]
        update: dict[str, object] = {"rounds": number, "tokens_per_s": outcome.tokens_per_s}
        if outcome.kernel is not None:
            update |= {"kernel_ran": outcome.kernel, "peak_memory_bytes": outcome.peak_memory_bytes,
                       "compile_seconds": outcome.compile_seconds}
        if outcome.tokens_per_s is None:
            update |= {"fate": "failed", "reason": outcome.short_reason()}
        self.trials[index] = trial.model_copy(update=update)
        self.progress(self.clock.fraction(), f"round {number}: {trial.config.label}: {outcome.figures()}")

    def rank(self, indices: list[int]) -> list[int]:
        return sorted(indices, key=lambda index: -(self.trials[index].tokens_per_s or 0.0))

    # --- the finalists --------------------------------------------------------------------------------------
    def finals(self, alive: list[int]) -> list[Finalist]:
        finalists: list[Finalist] = []
        batches = self.spec.tune.first_round_batches * 2
        for members in grouped(alive, [trial.config for trial in self.trials], self.spec.mode).values():
            self.progress(self.clock.fraction(), f"finalists: {self.trials[members[0]].config.label}, "
                                                 f"{self.spec.tune.repeats} repeats")
            started = time.monotonic()
            rows = self.runner.measure([self.trials[index].config for index in members], batches,
                                       self.spec.tune.repeats, self.final_limit(members[0]), lambda: False)
            self.spent = self.spent.with_finals_job(time.monotonic() - started)
            for index, outcome in zip(members, rows, strict=True):
                self.trials[index] = self.trials[index].model_copy(update={"fate": "finalist"})
                finalists.append(self.finalist(index, outcome))
        return sorted(finalists, key=lambda finalist: -(finalist.tokens_per_s or 0.0))

    def final_limit(self, index: int) -> float:
        """A finalists' group's time limit: what the budget has left, and never less than its trials suggest."""
        trial_s = self.durations.jobs.get(self.settings_of(index), 0.0)
        return max(self.clock.left, FINAL_MIN_S, self.spec.tune.repeats * trial_s)

    def settings_of(self, index: int) -> JobSettings:
        return job_settings(self.trials[index].config, self.spec.mode)

    @staticmethod
    def finalist(index: int, outcome: Measured) -> Finalist:
        return Finalist(trial=index, tokens_per_s=outcome.tokens_per_s, spread=outcome.spread,
                        gpu_activity=outcome.gpu_activity, status=outcome.status, reason=outcome.reason)

    # --- the answer -----------------------------------------------------------------------------------------
    def result(self, finalists: list[Finalist], partial: PartialResult | None) -> TuneResult:
        winner = next((finalist.trial for finalist in finalists if finalist.status == "ok"), None)
        environment = self.runner.environment or self.fallback_environment()
        chosen = None if winner is None else self.trials[winner].config
        return TuneResult(spec=self.spec, environment=environment, trials=list(self.trials), finalists=finalists,
                          winner=winner, memory_bytes=self.memory, wall_seconds=self.clock.elapsed, spent=self.spent,
                          equivalents=[] if chosen is None else equivalents(
                              self.spec, chosen, self.trials[winner].kernel_ran if winner is not None else None),
                          partial=partial)

    def report_partial(self) -> None:
        planned = len(self.trials)
        self.on_partial(self.result([], PartialResult(rows_finished=planned, rows_planned=planned)))

    def fallback_environment(self) -> Environment:
        """Where the tune ran when no trial reported it (every one pruned or failed)."""
        from padbench.worker.runtime.device import resolve_device
        from padbench.worker.runtime.environment import collect_environment

        return collect_environment(resolve_device(self.spec.device), dataset_digest=None, seeds={},
                                   peak_flops=None, peak_source=None)


def run_tune_job(spec: TuneJobSpec, progress: ProgressFn, on_partial: PartialFn,
                 kernel_names: Callable[[], list[str]]) -> TuneResult:
    return Tune(spec, progress, on_partial, kernel_names()).run()

