"""`activation_checkpointing: auto`: the least recompute whose steps fit, found by the memory plan and the OOM
probe's children (a fake device where recompute shrinks activations, and the real child on the CPU)."""

from __future__ import annotations

import pytest
import torch

from padbench.contract.spec import DataSpec, MeasurementSpec, ModelSpec, ProbeSpec, StrategySpec
from padbench.contract.training import TrainingSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.step_memory import HEADROOM, StepPlanner
from padbench.worker.jobs.padding.auto_batch import expand_axes
from padbench.worker.jobs.padding.auto_checkpointing import decide_checkpointing
from padbench.worker.runtime.isolation import SpecProblem

MIB = 2**20
TINY = ModelSpec(config={"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
                         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
                         "max_position_embeddings": 128})
FAKE = "tests.integration.probe_targets:fake_recompute_device"


def training_spec(batch_size: int = 8, budget: int | None = 1024 * MIB, **update: object) -> PaddingJobSpec:
    spec = PaddingJobSpec(model=TINY, device="cpu", dtype="fp32", attention="sdpa", mode="training",
                          batch_size=batch_size, data=DataSpec(max_length=64, num_samples=32),
                          strategies=[StrategySpec(name="static"), StrategySpec(name="dynamic")],
                          training=TrainingSpec(activation_checkpointing="auto"),
                          probe=ProbeSpec(cpu_memory_budget_bytes=budget), **update)
    return expand_axes(spec)


def quiet(fraction: float, message: str) -> None:
    pass


@pytest.mark.slow  # probe children, one per level tried
def test_auto_takes_the_least_recompute_that_the_probe_finds_fits() -> None:
    messages: list[str] = []
    decided, how = decide_checkpointing(training_spec(), torch.device("cpu"), lambda _f, m: messages.append(m),
                                        probe_target=FAKE)
    assert how is not None and how.chosen == "ops"
    assert decided.training.activation_checkpointing == "ops"
    fates = {candidate.checkpointing: candidate.outcome for candidate in how.candidates}
    assert fates == {"none": "out of memory", "ops": "fits", "selective": "not tried", "full": "not tried"}
    assert how.reason.startswith("the least recompute that fits every row at its batch size: ops")
    assert "none out of memory" in how.reason
    assert how.available_bytes == 1024 * MIB
    assert any(message.startswith("recompute none: ") for message in messages)


@pytest.mark.slow  # probe children, one per level tried
def test_a_level_that_fits_with_too_little_room_to_spare_is_passed_over() -> None:
    # Batch 9 on the fake device: none runs out (118 MiB of 100), ops fits at 91 MiB (more than 90% of the
    # device: the job holds more than the probe's step), selective at 64 MiB.
    _, how = decide_checkpointing(training_spec(batch_size=9), torch.device("cpu"), quiet, probe_target=FAKE)
    assert how is not None and how.chosen == "selective"
    assert [candidate.outcome for candidate in how.candidates] == ["out of memory", "no headroom", "fits", "not tried"]
    assert "ops no headroom" in how.reason


@pytest.mark.slow  # probe children, one per level tried
def test_levels_over_the_plan_are_not_probed() -> None:
    # A budget between the plan's step without recompute and with full recompute; the fake device then fits
    # whatever is probed at batch 1.
    plain = training_spec(batch_size=1)
    planner = StepPlanner(plain, ranks=1)
    needed = [planner.fit(1, level, None).needed for level in ("none", "full")]
    spec = training_spec(batch_size=1, budget=int(sum(needed) / 2 / (1 - HEADROOM)))
    _, how = decide_checkpointing(spec, torch.device("cpu"), quiet, probe_target=FAKE)
    assert how is not None
    fates = [candidate.outcome for candidate in how.candidates]
    assert "over the plan" in fates and fates.index("fits") == fates.count("over the plan")
    assert all(candidate.planned_bytes > 0 for candidate in how.candidates)


def test_without_a_memory_limit_on_the_cpu_auto_is_none_and_says_why() -> None:
    _, how = decide_checkpointing(training_spec(budget=None), torch.device("cpu"), quiet,
                                  probe_target="tests.integration.probe_targets:must_not_run")
    assert how is not None and how.chosen == "none" and "no memory limit is known" in how.reason
    assert {candidate.outcome for candidate in how.candidates} == {"not tried"}


@pytest.mark.slow  # probe children, one per level tried
def test_when_even_full_recompute_runs_out_the_job_says_what_to_change() -> None:
    with pytest.raises(SpecProblem, match="even full recompute runs out of memory"):
        decide_checkpointing(training_spec(batch_size=64), torch.device("cpu"), quiet, probe_target=FAKE)


def test_a_spec_without_auto_is_left_as_it_is() -> None:
    spec = training_spec().model_copy(update={"training": TrainingSpec(activation_checkpointing="full")})
    assert decide_checkpointing(spec, torch.device("cpu"), quiet) == (spec, None)


def test_auto_with_auto_batch_sizes_is_refused_naming_the_field() -> None:
    spec = PaddingJobSpec(model=TINY, device="cpu", mode="training", batch_size="auto", data=DataSpec(max_length=64),
                          training=TrainingSpec(activation_checkpointing="auto"),
                          probe=ProbeSpec(cpu_memory_budget_bytes=64 * MIB))
    problems = dict(spec.new_job_problems())
    assert "recompute" in problems[("training", "activation_checkpointing")]


@pytest.mark.slow
def test_a_training_job_with_auto_states_the_choice_and_trains_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole job, its probe children real: a generous budget fits without recompute."""
    from padbench.worker.jobs.padding import job as padding_job

    spec = PaddingJobSpec(model=TINY, device="cpu", dtype="fp32", attention="sdpa", mode="training", batch_size=4,
                          data=DataSpec(max_length=64, num_samples=16), strategies=[StrategySpec(name="static")],
                          training=TrainingSpec(activation_checkpointing="auto"), compile=False,
                          probe=ProbeSpec(cpu_memory_budget_bytes=2048 * MIB),
                          measurement=MeasurementSpec(warmup_batches=0, min_seconds=0, min_batches=1,
                                                      correctness_samples=2))
    result = padding_job.run_padding_job(spec, quiet)
    assert result.training is not None and result.training.activation_checkpointing == "none"
    decision = result.training.auto_checkpointing
    assert decision is not None and decision.chosen == "none"
    assert decision.candidates[0].outcome == "fits" and decision.candidates[0].peak_bytes
    assert result.spec.training.activation_checkpointing == "auto"
    assert result.strategies[0].status == "ok", result.strategies[0].error


def test_the_job_header_states_what_auto_chose() -> None:
    from padbench.contract.training import AutoCheckpointing, RecomputeCandidate, TrainingRun
    from padbench.kinds.padding.training import training_lines

    decision = AutoCheckpointing(chosen="ops", available_bytes=80 * 2**30, reason="because",
                                 candidates=[RecomputeCandidate(checkpointing="none", outcome="out of memory",
                                                                planned_bytes=1)])
    run = TrainingRun(precision="bf16", loss="full-logits", activation_checkpointing="ops", method="full",
                      trainable_parameters=1, total_parameters=1, auto_checkpointing=decision)

    class Result:
        training = run

    assert training_lines(Result())[-1] == "activation checkpointing auto chose ops: because"  # type: ignore[arg-type]




def test_a_row_out_of_memory_names_a_setting_that_would_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.jobs.padding import job as padding_job
    from padbench.worker.jobs.padding.strategy_run import StrategyRun

    def out_of_memory(self: StrategyRun) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has 1 GiB free. More")

    monkeypatch.setattr(StrategyRun, "_measure_strategy", out_of_memory)
    spec = PaddingJobSpec(model=TINY, device="cpu", dtype="fp32", attention="sdpa", mode="training", batch_size=8,
                          data=DataSpec(max_length=64, num_samples=16), strategies=[StrategySpec(name="static")],
                          compile=False, probe=ProbeSpec(cpu_memory_budget_bytes=4 * MIB))
    row = padding_job.run_padding_job(spec, quiet).strategies[0]
    assert row.status == "failed" and row.error is not None
    assert row.error.startswith("OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. by the memory plan")
