"""A tune's plan before anything runs: its budget read as a duration, the configurations its space yields (and
never those that cannot run together), what the memory plan prunes and why, and the settings to paste (the table
a result renders to: test_tune_report.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from padbench.contract.kinds import parse_job_spec
from padbench.contract.results import Environment
from padbench.kinds.padding.contract import PaddingJobSpec, StrategyResult
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec, TuneResult
from padbench.kinds.tune.report import render_table
from padbench.worker.jobs.tune.equivalents import equivalents
from padbench.worker.jobs.tune.memory import planner
from padbench.worker.jobs.tune.space import configurations
from padbench.worker.jobs.tune.trial_specs import grouped, padding_spec

SPACE = {"layouts": ["dynamic", "packed"], "kernels": ["sdpa", "eager"], "batch_sizes": [4, 8],
         "checkpointing": ["none", "full"], "compile": [False]}


def tune(**fields: Any) -> TuneJobSpec:
    document = {"kind": "tune", "model": "tiny", "device": "cpu", "dtype": "fp32",
                "data": {"num_samples": 64, "max_length": 64}, "tune": {"space": SPACE}, **fields}
    spec = parse_job_spec(document)
    assert isinstance(spec, TuneJobSpec)
    return spec


@pytest.mark.parametrize(("budget", "seconds"), [(900, 900.0), ("15m", 900.0), ("2h", 7200.0), ("90s", 90.0),
                                                  ("1.5 min", 90.0)])
def test_a_budget_is_seconds_or_a_duration(budget: object, seconds: float) -> None:
    assert tune(tune={"budget": budget}).tune.budget == seconds


@pytest.mark.parametrize("budget", ["fast", "-5m", 0, "48h"])
def test_a_budget_that_is_no_duration_is_refused_naming_the_field(budget: object) -> None:
    with pytest.raises(ValidationError, match="budget"):
        tune(tune={"budget": budget})


def test_the_space_yields_every_combination_that_can_run_together() -> None:
    assert len(configurations(tune(), ["sdpa"])) == 2 * 2 * 2 * 2
    bf16 = tune(dtype="bf16", tune={"space": {**SPACE, "kernels": ["flash", "sdpa"], "precision": ["bf16", "fp8"]}})
    assert {config.precision for config in configurations(bf16, [])} == {"bf16", "fp8"}
    fp32 = configurations(tune(tune={"space": {**SPACE, "kernels": ["flash", "sdpa"]}}), [])
    assert {config.kernel for config in fp32} == {"sdpa"}  # flash kernels need a half-precision dtype
    inference = configurations(tune(mode="inference"), [])
    assert {(config.checkpointing, config.precision) for config in inference} == {(None, None)}
    assert len(inference) == 2 * 2 * 2


def test_kernels_none_of_which_runs_in_the_dtype_are_refused_at_submission_naming_the_field() -> None:
    only_flash = tune(tune={"space": {**SPACE, "kernels": ["flash", "torch-flash"]}})
    [(where, reason)] = only_flash.new_job_problems()
    assert where == ("tune", "space", "kernels") and "dtype is fp32: no configuration could run" in reason
    assert not tune(tune={"space": {**SPACE, "kernels": ["flash", "sdpa"]}}).new_job_problems()
    assert not tune(dtype="bf16", tune={"space": {**SPACE, "kernels": ["flash"]}}).new_job_problems()


def test_a_worker_whose_kernels_cannot_run_the_space_fails_the_tune_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.jobs.tune import job

    monkeypatch.setattr(job, "TrialRunner", lambda spec, on_message: CannedRunner(lambda config: 1.0))
    worker_kernels = tune(tune={"space": {name: value for name, value in SPACE.items() if name != "kernels"}})
    with pytest.raises(job.NoConfiguration, match="attention kernels \\(flash-attn\\) need another dtype"):
        job.Tune(worker_kernels, lambda fraction, message: None, lambda partial: None, ["flash-attn"])


def test_the_memory_plan_prunes_what_cannot_fit_and_says_why() -> None:
    spec = tune()
    plans = planner(spec, ranks=1)
    needs = {config.label: plans.fit(config, None).needed for config in configurations(spec, [])}
    largest = max(needs.values())
    between = int(max(need for need in needs.values() if need < largest) / 0.9) + 1
    fits = [plans.fit(config, between) for config in configurations(spec, [])]
    pruned = [fit for fit in fits if not fit.fits]
    assert 0 < len(pruned) < len(fits)
    assert pruned[0].reason().startswith("the memory plan needs ") and "activations, estimated" in pruned[0].reason()
    full = next(config for config in configurations(spec, []) if config.checkpointing == "full")
    none = full.model_copy(update={"checkpointing": "none"})
    assert plans.fit(full, None).activations < plans.fit(none, None).activations


def test_the_answer_ends_with_settings_to_paste_and_says_what_has_no_equivalent() -> None:
    spec = tune(mode="training")
    chosen = TuneConfig(layout="packed", kernel="sdpa", batch_size=8, checkpointing="ops", compile=True,
                        precision="auto")
    found = {equivalent.tool: equivalent for equivalent in equivalents(spec, chosen)}
    pasted = parse_job_spec(json.loads(found["padbench"].settings or ""))
    assert isinstance(pasted, PaddingJobSpec) and pasted.batch_size == 8 and pasted.compile is True
    assert pasted.training.activation_checkpointing == "ops" and [s.name for s in pasted.strategies] == ["packed"]
    trl = json.loads(found["TRL SFTConfig"].settings or "")
    assert trl["packing"] and trl["padding_free"] and trl["torch_compile"] and trl["gradient_checkpointing"]
    assert any("recomputes whole layers only" in missing for missing in found["TRL SFTConfig"].missing)
    assert 'selective_ac_option = "op"' in (found["torchtitan"].settings or "")
    padded = equivalents(spec, chosen.model_copy(update={"layout": "static"}))
    titan = next(equivalent for equivalent in padded if equivalent.tool == "torchtitan")
    assert titan.settings is None and "packed sequences only" in titan.missing[0]


class CannedRunner:
    """Measures a configuration as `rate(config)` tokens/s, recording what each call measured."""

    def __init__(self, rate: Any) -> None:
        self.rate, self.calls, self.environment = rate, [], None

    def ranks(self) -> int:
        return 1

    def measure(self, configs: Any, batches: int, repeats: int, timeout_s: float, should_stop: Any) -> list[Any]:
        from padbench.worker.jobs.tune.trials import Measured

        self.calls.append(([config.label for config in configs], repeats))
        rows = []
        for config in configs:
            row = StrategyResult(strategy=config.layout, attention=config.kernel, kernel=config.kernel,
                                 batch_size=config.batch_size, status="ok", tokens_per_s=self.rate(config))
            rows.append(Measured.of_padding(row))
        return rows


def test_compiled_configurations_join_as_twins_of_the_fastest_eager_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.jobs.tune import job

    spec = tune(tune={"budget": 600, "finalists": 2, "space": {**SPACE, "compile": [False, True]}})
    runner = CannedRunner(lambda config: config.batch_size * (3.0 if config.compile else 1.0)
                          * (2.0 if config.layout == "packed" else 1.0))
    monkeypatch.setattr(job, "TrialRunner", lambda spec, on_message: runner)
    monkeypatch.setattr(job.Tune, "fallback_environment", lambda self: Environment(
        hostname="box", device="cpu", python="3.11", torch="2.13", started_at="2026-11-27"))
    result = job.Tune(spec, lambda fraction, message: None, lambda partial: None, ["sdpa", "eager"]).run()
    first_round = runner.calls[0][0] + runner.calls[1][0]
    assert first_round and not any("compiled" in label for label in first_round)  # eager only at first
    compiled = [trial for trial in result.trials if trial.config.compile]
    measured = [trial for trial in compiled if trial.rounds > 0]
    assert len(measured) == 2  # the twins of the two fastest eager configurations
    assert all(trial.fate == "stopped" and "eager twin" in (trial.reason or "")
               for trial in compiled if trial.rounds == 0)
    winner = result.trials[result.winner or 0]
    assert winner.config.compile and winner.config.layout == "packed" and winner.config.batch_size == 8
    assert [repeats for _, repeats in runner.calls][-1] == spec.tune.repeats  # the finalists, with repeats


class SlowRunner(CannedRunner):
    """A canned runner whose every trial job takes `seconds` of a fake clock: a large model's trial, mostly its
    child's start and model build."""

    def __init__(self, rate: Any, clock: list[float], seconds: float) -> None:
        super().__init__(rate)
        self.clock, self.seconds = clock, seconds
        self.limits: list[float] = []

    def measure(self, configs: Any, batches: int, repeats: int, timeout_s: float, should_stop: Any) -> list[Any]:
        self.limits.append(timeout_s)
        self.clock[0] += self.seconds
        return super().measure(configs, batches, repeats, timeout_s, should_stop)


def slow_tune(monkeypatch: pytest.MonkeyPatch, budget: float, messages: list[str], partials: list[Any],
              ) -> tuple[TuneResult, SlowRunner, float]:
    """A tune whose every trial job takes 150 s of a fake clock (two eager groups, two compiled twins and two
    finalists' jobs fill 900 s): its result, its runner and the clock when it ended."""
    from types import SimpleNamespace

    from padbench.worker.jobs.tune import job

    clock = [0.0]
    monkeypatch.setattr(job, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    space = {**SPACE, "layouts": ["packed"], "kernels": ["sdpa"], "compile": [False, True]}
    spec = tune(tune={"budget": budget, "finalists": 2, "space": space})
    runner = SlowRunner(lambda config: config.batch_size * (3.0 if config.compile else 1.0), clock, seconds=150.0)
    monkeypatch.setattr(job, "TrialRunner", lambda spec, on_message: runner)
    monkeypatch.setattr(job.Tune, "fallback_environment", lambda self: Environment(
        hostname="box", device="cpu", python="3.11", torch="2.13", started_at="2026-11-27"))
    result = job.Tune(spec, lambda fraction, message: messages.append(message), partials.append, ["sdpa"]).run()
    return result, runner, clock[0]


def test_compiled_twins_are_measured_in_the_first_round_when_it_takes_most_of_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two eager trial jobs take a third of the budget: no second round fits, yet the compiled twins are tried,
    and the faster of them wins, instead of an eager answer only because compiling was never measured."""
    messages: list[str] = []
    partials: list[Any] = []
    result, runner, ended = slow_tune(monkeypatch, 900, messages, partials)
    repeats = result.spec.tune.repeats
    assert [repeats for _, repeats in runner.calls] == [1, 1, 1, 1, repeats, repeats]
    assert ended <= 900  # the finalists' time was kept back
    header = render_table(result).splitlines()[1]
    assert header.endswith("the tune took 900 s (4 trial jobs 600 s, the finalists' 2 jobs 300 s)")
    # every trial's figure is said as it comes, and handed over, so a tune stopped outright keeps it
    assert "round 1: packed · sdpa · batch 8 · ckpt none · auto · compiled: 24 tokens/s" in messages
    assert len(partials) == 4 and sum(trial.rounds > 0 for trial in partials[0].trials) == 2
    # the budget is spent, yet each finalist gets the time its trial took, for each of its repeats
    assert runner.limits[-2:] == [repeats * 150.0] * 2
    twins = [trial for trial in result.trials if trial.config.compile and trial.rounds == 1]
    assert len(twins) == 2 and all(trial.tokens_per_s for trial in twins)
    winner = result.trials[result.winner or 0]
    assert winner.config.compile and winner.config.batch_size == 8


def test_a_tune_starts_nothing_that_would_leave_the_finalists_no_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 600 s, two eager trials and the two finalists' jobs fill the budget: the compiled twins are left out,
    saying why, and the tune ends within it."""
    result, runner, ended = slow_tune(monkeypatch, 600, [], [])
    assert len(runner.calls) == 4 and ended <= 600
    left_out = [trial for trial in result.trials if trial.config.compile and trial.fate == "not reached"]
    assert len(left_out) == 2
    assert all("could not hold its trial (about 150 s) and the finalists' measurement (about 300 s)"
               in (trial.reason or "") for trial in left_out)


class UnforeseenRunner(SlowRunner):
    """A runner whose trial jobs take the given seconds in turn: one far slower than the trials before it."""

    def __init__(self, rate: Any, clock: list[float], seconds: list[float]) -> None:
        super().__init__(rate, clock, 0.0)
        self.durations = seconds

    def measure(self, configs: Any, batches: int, repeats: int, timeout_s: float, should_stop: Any) -> list[Any]:
        self.seconds = self.durations[min(len(self.calls), len(self.durations) - 1)]
        return super().measure(configs, batches, repeats, timeout_s, should_stop)


def test_a_group_a_round_has_no_time_for_keeps_its_figure_from_the_round_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 2's first trial job takes far longer than round 1's foretold: the second group no longer fits, and
    its configurations stay in the ranking by their round-1 figures, one of them a finalist."""
    from types import SimpleNamespace

    from padbench.worker.jobs.tune import job

    clock = [0.0]
    monkeypatch.setattr(job, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(job.Tune, "fallback_environment", lambda self: Environment(
        hostname="box", device="cpu", python="3.11", torch="2.13", started_at="2026-11-27"))
    spec = tune(tune={"budget": 3000, "finalists": 3, "space": {**SPACE, "kernels": ["sdpa"]}})
    runner = UnforeseenRunner(lambda config: config.batch_size * (1.5 if config.checkpointing == "none" else 1.0),
                              clock, seconds=[150.0, 150.0, 2550.0, 150.0])
    monkeypatch.setattr(job, "TrialRunner", lambda spec, on_message: runner)
    result = job.Tune(spec, lambda fraction, message: None, lambda partial: None, ["sdpa"]).run()
    assert len(runner.calls) == 5  # two groups in round 1, one in round 2, then the finalists' two jobs
    finalists = [result.trials[finalist.trial] for finalist in result.finalists]
    assert sorted((trial.config.checkpointing, trial.rounds) for trial in finalists) == [
        ("full", 1), ("none", 2), ("none", 2)]


def test_a_finalists_time_is_predicted_from_its_trial() -> None:
    """A trial job's time less its rows' warm-ups and measured batches is what any job of its settings pays again;
    a finalist measures its rows for `final_batches`; a compiled group before any compiled trial is estimated
    from the eager ones, which it can only exceed."""
    from padbench.worker.jobs.tune.schedule import Durations
    from padbench.worker.jobs.tune.trials import Measured

    durations = Durations(final_batches=24)
    eager, compiled = (False, "none", "auto", None), (True, "none", "auto", None)
    rows = {0: Measured(tokens_per_s=1.0, warmup_seconds=5.0, measured_seconds=8.0),
            1: Measured(tokens_per_s=2.0, warmup_seconds=3.0, measured_seconds=4.0), 2: Measured()}
    durations.record(eager, 100.0, rows, batches=4)  # fixed: 100 - (5 + 8) - (3 + 4) = 80
    assert durations.group(eager, [0], 8) == pytest.approx(80 + 5 + 2 * 8)
    assert durations.finals({eager: [0, 1]}) == pytest.approx(80 + (5 + 2 * 24) + (3 + 1 * 24))
    assert durations.group(compiled, [3], 4) == pytest.approx(80 + 5 + 2 * 4)  # the slowest eager row
    durations.record(compiled, 200.0, {3: Measured(tokens_per_s=3.0, warmup_seconds=60.0, measured_seconds=4.0)}, 4)
    assert durations.group(compiled, [4], 4) == pytest.approx(136 + 60 + 4)


def test_training_on_several_gpus_searches_reshard_after_forward() -> None:
    """Each reshard setting is a trial job of its own, whose padding spec carries it, and the answer pastes it."""
    spec = tune(mode="training", gpus=2, device="cpu")
    one, several = configurations(spec, ["sdpa"]), configurations(spec, ["sdpa"], ranks=2)
    assert {config.reshard_after_forward for config in one} == {None} and len(several) == 2 * len(one)
    kept = next(config for config in several if config.reshard_after_forward is False and config.layout == "packed")
    assert "no reshard" in kept.label
    groups = len(grouped(range(len(one)), one, "training"))
    assert len(grouped(range(len(several)), several, "training")) == 2 * groups
    assert padding_spec(spec, [kept], batches=1).distributed.reshard_after_forward is False
    found = {equivalent.tool: equivalent for equivalent in equivalents(spec, kept)}
    assert json.loads(found["accelerate FSDP"].settings or "")["fsdp_reshard_after_forward"] is False
    assert 'fsdp_reshard_after_forward = "never"' in (found["torchtitan"].settings or "")
    assert json.loads(found["padbench"].settings or "")["distributed"] == {"reshard_after_forward": False}
