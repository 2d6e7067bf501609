"""`activation_checkpointing: auto` in a training job: the least recompute whose steps fit at the batch sizes asked.

Levels are tried least recompute first (none, ops, selective, full). The memory plan's estimate (model state
exact, activations estimated) passes over the levels it says cannot fit; the first level it admits is confirmed
by the OOM probe: each of the job's rows is tried at its batch size in an isolated child, exactly as the row
will run, the most demanding first, and a row that runs out of memory moves the choice to the next level. The
estimate only orders the work: where it admits no level, every level is still probed, least first, so a
generous model of the activations never refuses what fits. Decided before the job builds its model, so the
children see the device as the job will; the result states the level chosen and each level's fate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from padbench.contract.spec import StrategySpec
from padbench.contract.training import AutoCheckpointing, Checkpointing, RecomputeCandidate, RecomputeOutcome
from padbench.contract.units import format_bytes
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import KernelUnavailable
from padbench.worker.engine.model.step_memory import HEADROOM, LEAST_RECOMPUTE_FIRST, Fit, StepPlanner
from padbench.worker.jobs.padding.auto_batch import labelled, probed_kernel
from padbench.worker.jobs.padding.probe.trials import PROBE_TARGET, RankProbing, SharedProbes, size_oracle
from padbench.worker.jobs.probing.oracle import ProbeFailed, probe_device
from padbench.worker.jobs.probing.protocol import DeviceFacts
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.runtime.progress import ProgressFn, progress_span


@dataclass(frozen=True)
class LevelTrial:
    outcome: RecomputeOutcome
    peak_bytes: int | None = None


def decide_checkpointing(spec: PaddingJobSpec, device: torch.device, progress: ProgressFn,
                         group: RankProbing | None = None,
                         probe_target: str = PROBE_TARGET) -> tuple[PaddingJobSpec, AutoCheckpointing | None]:
    """The spec with `auto` replaced by the level chosen, and how it was chosen (None where nothing was `auto`).
    `spec` is expanded: one batch size per strategy."""
    if spec.mode != "training" or spec.training.activation_checkpointing != "auto":
        return spec, None
    rows = _rows_most_demanding_first(spec)
    planner = StepPlanner(spec, ranks=1 if group is None else group.ranks.world)
    if probe_device(spec.device) == "cpu" and spec.probe.cpu_memory_budget_bytes is None:
        return _chosen(spec, AutoCheckpointing(
            chosen="none", available_bytes=None, reason="no memory limit is known on the CPU (set "
            "probe.cpu_memory_budget_bytes to stand in for device memory): the least recompute, none",
            candidates=[_candidate(level, _planned(planner, spec, rows, level, None), LevelTrial("not tried"))
                        for level in LEAST_RECOMPUTE_FIRST]))
    with SharedProbes(spec, group) as shared:
        facts = shared.device_facts(spec, progress)
        available = _available_bytes(spec, facts)
        fits = {level: _planned(planner, spec, rows, level, available) for level in LEAST_RECOMPUTE_FIRST}
        admitted = [level for level, fit in fits.items() if fit.fits]
        trials = _probe_levels(spec, rows, device, progress, Probing(shared, facts, group, probe_target), admitted)
    chosen = next((level for level, trial in trials.items() if trial.outcome == "fits"), None)
    if chosen is None:
        room = "" if available is None else f" of {format_bytes(available)}"
        raise SpecProblem(f"training.activation_checkpointing auto: even full recompute runs out of memory at the "
                          f"batch sizes asked (the plan estimates {format_bytes(fits['full'].needed)} per GPU"
                          f"{room}): ask for smaller batch sizes or more GPUs")
    return _chosen(spec, AutoCheckpointing(
        chosen=chosen, available_bytes=available, reason=_reason(chosen, trials),
        candidates=[_candidate(level, fits[level], trials[level]) for level in LEAST_RECOMPUTE_FIRST]))


@dataclass(frozen=True)
class Probing:
    shared: SharedProbes
    facts: DeviceFacts
    group: RankProbing | None
    target: str  # the probe child's function


def _probe_levels(spec: PaddingJobSpec, rows: list[StrategySpec], device: torch.device, progress: ProgressFn,
                  probing: Probing, admitted: list[Checkpointing]) -> dict[Checkpointing, LevelTrial]:
    """Each level's fate, least recompute first, probing from the first level the plan admits (from none where
    it admits none) until one fits; the levels after it are not tried."""
    first = LEAST_RECOMPUTE_FIRST.index(admitted[0]) if admitted else 0
    trials: dict[Checkpointing, LevelTrial] = {level: LevelTrial("over the plan")
                                               for level in LEAST_RECOMPUTE_FIRST[:first]}
    for number, level in enumerate(LEAST_RECOMPUTE_FIRST[first:]):
        if any(trial.outcome == "fits" for trial in trials.values()):
            trials[level] = LevelTrial("not tried")
            continue
        span = progress_span(progress, number / 4, (number + 1) / 4)
        trials[level] = _probe_level(spec, level, rows, device, labelled(span, f"recompute {level}: "), probing)
    return trials


def _probe_level(spec: PaddingJobSpec, level: Checkpointing, rows: list[StrategySpec], device: torch.device,
                 progress: ProgressFn, probing: Probing) -> LevelTrial:
    """Every row at its batch size with `level`'s recompute, the most demanding first: out of memory at the first
    row that runs out, and no headroom at the first that leaves less than `HEADROOM` of the device free (the
    allocator's reserved peak, where it reports one: the job holds more than the probe's step, and a level that
    fits the probe by a few hundred MiB runs out in the job)."""
    at_level = spec.model_copy(update={"training": spec.training.model_copy(
        update={"activation_checkpointing": level})})
    peak: int | None = None
    for strategy in rows:
        try:
            kernel = probed_kernel(at_level, strategy, device)
            probing.shared.device_facts(at_level, progress)  # marks where this row's children start
            # The label names the level: a sharded model's probe children meet under it (attempts numbered from 1
            # per oracle), so each level's must differ from the last's.
            label = f"{strategy.label} with {kernel}, recompute {level}"
            oracle = size_oracle(at_level, strategy, kernel, probing.facts, label, progress, probing.shared,
                                 probing.target, probing.group)
            reading = oracle(_size(strategy))
        except (ProbeFailed, KernelUnavailable) as error:
            raise SpecProblem(f"training.activation_checkpointing auto: the probe of {strategy.label} at batch "
                              f"{_size(strategy)} with recompute {level} failed: {error}") from None
        finally:
            probing.shared.strategy_done(probing.facts.device)
        if not reading.fits:
            return LevelTrial("out of memory", peak)
        held = reading.reserved_bytes or reading.peak_bytes or 0
        peak = max(peak or 0, held)
        if reading.capacity_bytes and held > reading.capacity_bytes * (1 - HEADROOM):
            return LevelTrial("no headroom", peak)
    return LevelTrial("fits", peak)


def _available_bytes(spec: PaddingJobSpec, facts: DeviceFacts) -> int | None:
    """What a step may use per GPU: the GPU's memory less what other processes hold; on the CPU the probe's
    budget, which stands in for device memory."""
    if facts.device == "cpu":
        return spec.probe.cpu_memory_budget_bytes
    if facts.total_bytes is None:
        return None
    return facts.total_bytes - (facts.used_by_others_bytes or 0)


def _rows_most_demanding_first(spec: PaddingJobSpec) -> list[StrategySpec]:
    distinct = {(strategy.label, spec.attention_for(strategy), _size(strategy)): strategy
                for strategy in spec.strategies}
    return sorted(distinct.values(), key=lambda strategy: -_size(strategy) * strategy.widest(spec.data.max_length))


def _size(strategy: StrategySpec) -> int:
    size = strategy.batch_size
    if not isinstance(size, int):  # refused at submit (it is a new-job problem); a local run meets it here
        raise SpecProblem("training.activation_checkpointing auto needs the batch sizes stated, not batch_size "
                          f"{size}")
    return size


def _planned(planner: StepPlanner, spec: PaddingJobSpec, rows: list[StrategySpec], level: Checkpointing,
             available: int | None) -> Fit:
    """The plan's fit of the job's most demanding row (activations grow with a step's tokens)."""
    most = rows[0]
    return planner.fit(_size(most), level, available, most.widest(spec.data.max_length))


def _candidate(level: Checkpointing, fit: Fit, trial: LevelTrial) -> RecomputeCandidate:
    return RecomputeCandidate(checkpointing=level, outcome=trial.outcome, planned_bytes=fit.needed,
                              peak_bytes=trial.peak_bytes)


def _reason(chosen: Checkpointing, trials: dict[Checkpointing, LevelTrial]) -> str:
    before = [f"{level} {trial.outcome}" for level, trial in trials.items()
              if level != chosen and trial.outcome in ("over the plan", "out of memory", "no headroom")]
    fitted = trials[chosen]
    peak = "" if not fitted.peak_bytes else f" (peak {format_bytes(fitted.peak_bytes)})"
    return (f"the least recompute that fits every row at its batch size: {chosen}{peak}"
            + (f"; {', '.join(before)}" if before else ""))


def _chosen(spec: PaddingJobSpec, decision: AutoCheckpointing) -> tuple[PaddingJobSpec, AutoCheckpointing]:
    training = spec.training.model_copy(update={"activation_checkpointing": decision.chosen})
    return spec.model_copy(update={"training": training}), decision
