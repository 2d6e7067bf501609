"""`compile: auto | true | false`: which rows compile, what they compile, and what the row says about it.

The decision is tested on canned step times (the rule, not this machine's speed); the compiled paths run a tiny
model through dynamo with its `eager` backend, which traces and guards as inductor does, in a fraction of the time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

from padbench.contract.spec import MeasurementSpec
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training import steps
from padbench.worker.engine.training.checkpointing import checkpoint_layers, decoder_layers, is_checkpoint_wrapper
from padbench.worker.engine.training.compilation import compile_layers, is_compiled, uncompile_layers
from padbench.worker.jobs.padding import compiling, strategy_run
from padbench.worker.jobs.padding.compiling import RowCompiler, choose_compiled_step, pays_back, planned_steps
from tests.unit.test_padding_job import assert_measured, run, tiny_spec

CPU = torch.device("cpu")
QUICK = MeasurementSpec(min_seconds=0, min_batches=2, repeats=3)


@pytest.fixture
def eager_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(steps, "COMPILE_BACKEND", "eager")
    yield
    torch._dynamo.reset()


def tiny_llama() -> nn.Module:
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=2,
                         vocab_size=64)
    return LlamaForCausalLM(config)


def test_planned_steps_are_whole_passes_until_both_minima_per_repeat() -> None:
    settings = MeasurementSpec(min_seconds=1.0, min_batches=5, repeats=3)
    assert planned_steps(4, settings, step_seconds=0.01) == 3 * 4 * 25  # 25 passes of 4 to last a second
    assert planned_steps(4, settings, step_seconds=1.0) == 3 * 8  # two passes for min_batches
    capped = settings.model_copy(update={"max_batches": 6})
    assert planned_steps(4, capped, step_seconds=0.01) == 3 * 6


def test_compiling_pays_back_only_when_the_time_saved_exceeds_the_compile_time() -> None:
    assert pays_back(eager_step_s=0.10, compiled_step_s=0.06, compile_seconds=30.0, planned=1000)  # saves 40 s
    assert not pays_back(eager_step_s=0.10, compiled_step_s=0.06, compile_seconds=30.0, planned=500)  # saves 20 s
    assert not pays_back(eager_step_s=0.10, compiled_step_s=0.12, compile_seconds=0.0, planned=10_000)


class FakeCompiler(RowCompiler):
    def __init__(self) -> None:
        super().__init__(nn.Linear(1, 1), "training")
        self.compiled = self.undone = False

    def compile(self) -> nn.Module:
        self.compiled = True
        return self.model

    def undo(self) -> None:
        self.undone = True


def canned_times(monkeypatch: pytest.MonkeyPatch, eager: float, first: float, compiled: float) -> FakeCompiler:
    compiler = FakeCompiler()

    def timed(step: Any, indices: Sequence[int], device: torch.device) -> list[float]:
        if not compiler.compiled:
            return [eager] * len(indices)
        return [first] + [compiled] * (len(indices) - 1)

    monkeypatch.setattr(compiling, "_timed", timed)
    return compiler


def choose(compiler: RowCompiler, requested: Any, settings: MeasurementSpec = QUICK) -> Any:
    return choose_compiled_step(requested, compiler, lambda model: lambda index: None, [0, 1], 100, settings, CPU,
                                Ranks())[1]


def test_auto_keeps_the_compiled_model_when_it_pays_back_and_reports_the_times(monkeypatch: pytest.MonkeyPatch) -> None:
    long_run = MeasurementSpec(min_seconds=600, min_batches=2, repeats=3)  # 30 minutes of eager steps
    compiler = canned_times(monkeypatch, eager=0.1, first=30.06, compiled=0.06)
    report = choose(compiler, "auto", long_run)
    assert report.compiled and report.scope == "decoder-layers" and not compiler.undone
    assert report.eager_step_s == 0.1 and report.compiled_step_s == 0.06
    assert report.compile_seconds == pytest.approx(30.0)
    assert report.reason.startswith("compiled: it saves 720.0 s over the measured run's 18000 steps")


def test_auto_goes_back_to_eager_when_the_compile_would_not_pay_back(monkeypatch: pytest.MonkeyPatch) -> None:
    run_of_a_minute = MeasurementSpec(min_seconds=20, min_batches=2, repeats=3)
    compiler = canned_times(monkeypatch, eager=0.1, first=60.06, compiled=0.06)
    report = choose(compiler, "auto", run_of_a_minute)
    assert compiler.compiled and compiler.undone and not report.compiled and report.scope is None
    assert report.reason == ("not compiled: it would save 24.0 s over the measured run's 600 steps, less than the "
                             "60.0 s it took to compile")


def test_auto_does_not_even_try_on_a_run_too_short_to_pay_back(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.01, first=1.0, compiled=0.005)
    report = choose(compiler, "auto")
    assert not compiler.compiled and not report.compiled and report.compile_seconds is None
    assert report.reason.startswith("not compiled: the measured run takes about 3.0 s eagerly (300 steps); "
                                 "compiling takes at least 20 s and saves at most 50% of a step")


def test_true_compiles_whatever_it_costs_and_false_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.01, first=1.0, compiled=0.02)
    assert choose(compiler, True).reason == "compiled: compile: true"
    assert choose(FakeCompiler(), False) is None


def test_layers_compile_in_place_and_checkpointed_ones_recompute_inside_the_compiled_graph(
        eager_backend: None) -> None:
    model = tiny_llama()
    checkpoint_layers(model, "selective")
    names = [name for name, _ in model.named_parameters()]
    assert compile_layers(model) == 4
    assert [name for name, _ in model.named_parameters()] == names  # the optimizer and snapshots see one model
    wrappers = [layer for layer in decoder_layers(model) if is_checkpoint_wrapper(layer)]
    assert len(wrappers) == 2 and all("context_fn" not in layer.checkpoint_fn.keywords for layer in wrappers)
    uncompile_layers(model)
    assert not any(is_compiled(layer) for layer in decoder_layers(model))
    assert all("context_fn" in layer.checkpoint_fn.keywords for layer in wrappers)  # eager recompute: replayed


def test_ops_checkpointed_layers_compile_with_the_policy_alone(eager_backend: None) -> None:
    model = tiny_llama()
    checkpoint_layers(model, "ops")
    compile_layers(model)
    # Inside a compiled graph the context must be the policy's two dispatch modes (dynamo takes nothing else).
    modes = [layer.checkpoint_fn.keywords["context_fn"]() for layer in decoder_layers(model)]
    assert all(isinstance(mode, TorchDispatchMode) for pair in modes for mode in pair)
    tokens = torch.randint(0, 64, (2, 12))
    model(input_ids=tokens, use_cache=False).logits.float().pow(2).mean().backward()
    assert all(parameter.grad is not None for parameter in model.parameters())


@pytest.mark.slow  # traces the tiny model with dynamo, per row (about 15 s)
def test_training_rows_compile_their_layers_checkpointed_or_not(eager_backend: None) -> None:
    for checkpointing in ("none", "selective", "ops"):
        spec = tiny_spec(mode="training", compile=True, strategies=["binned", "packed"],
                         model={"config": {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 512,
                                           "n_positions": 64}},
                         training={"activation_checkpointing": checkpointing, "loss": "full"})
        result = run(spec)
        for row in result.strategies:
            assert_measured(row, result)
            assert row.compilation is not None and row.compilation.compiled
            assert row.compilation.scope == "decoder-layers" and row.compilation.compile_seconds is not None


def test_auto_leaves_a_short_cpu_run_eager_and_says_why() -> None:
    result = run(tiny_spec(strategies=["packed"]))
    row = result.strategies[0]
    assert_measured(row, result)
    assert row.compilation is not None and row.compilation.requested == "auto" and not row.compilation.compiled
    assert row.compilation.reason.startswith("not compiled: the measured run takes about")
    table = render_table(result)
    assert "torch.compile (auto):\n  packed / " in table and " · compiled · " not in table
    assert csv_rows(result)[0]["compiled"] is False


def test_the_compile_decision_times_one_batch_repeated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of another shape would recompile inside the timed compiled steps and count as step time."""
    timed: list[list[int]] = []

    def record(step: Any, indices: Sequence[int], device: torch.device) -> list[float]:
        timed.append(list(indices))
        return [0.1] * len(indices)

    monkeypatch.setattr(compiling, "_timed", record)
    choose_compiled_step(True, FakeCompiler(), lambda model: lambda index: None, [4, 7, 9], 100, QUICK, CPU, False)
    assert timed == [[4, 4, 4], [4, 4, 4]]


@pytest.mark.slow  # traces the tiny model with dynamo (about 5 s)
def test_a_compiled_row_warms_up_on_every_batch_shape(eager_backend: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Binned batches differ in width and rows: each shape's recompile must land in the warm-up. An eager row
    keeps its short warm-up."""
    warmups: list[list[int]] = []
    original = strategy_run.measure

    def measure(*args: Any, warmup: Sequence[int], **kwargs: Any) -> Any:
        warmups.append(list(warmup))
        return original(*args, warmup=warmup, **kwargs)

    monkeypatch.setattr(strategy_run, "measure", measure)
    for compile_choice in (True, False):
        spec = tiny_spec(mode="training", compile=compile_choice, strategies=[{"name": "binned", "n_bins": 4}],
                         data={"source": "synthetic", "max_length": 64, "num_samples": 48, "seed": 3},
                         model={"config": {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 512,
                                           "n_positions": 64}},
                         training={"loss": "full"})
        result = run(spec)
        assert_measured(result.strategies[0], result)
    compiled, eager = warmups
    assert eager[0] == 0 and len(eager) <= 3  # its first batch, the smallest and the largest
    assert len(compiled) > len(eager) and compiled[0] == 0
