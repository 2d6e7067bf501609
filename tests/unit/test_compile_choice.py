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

from padbench.contract.horizon import RunHorizon
from padbench.contract.spec import MeasurementSpec
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training import steps
from padbench.worker.engine.training.checkpointing import checkpoint_layers, decoder_layers, is_checkpoint_wrapper
from padbench.worker.engine.training.compilation import compile_layers, is_compiled, uncompile_layers
from padbench.worker.jobs.padding import compiling, strategy_run
from padbench.worker.jobs.padding.compiling import RowCompiler, RowSettings, choose_compiled_step, pays_back
from tests.unit.test_padding_job import assert_measured, run, tiny_spec

CPU = torch.device("cpu")
GPU = torch.device("cuda")  # never touched: the step times are canned
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


def choose(compiler: RowCompiler, requested: Any, horizon: RunHorizon | None = None) -> Any:
    settings = RowSettings(horizon, tokens_per_step=1000.0)
    return choose_compiled_step(requested, compiler, lambda model: lambda index: None, [0, 1], settings, GPU,
                                Ranks())[1]


def test_auto_with_no_horizon_compiles_whenever_the_compiled_step_is_faster(monkeypatch: pytest.MonkeyPatch) -> None:
    # A long run: a minute of compiling for 40% off every step pays, however short the benchmark's own run.
    compiler = canned_times(monkeypatch, eager=0.1, first=60.06, compiled=0.06)
    report = choose(compiler, "auto")
    assert report.compiled and report.scope == "decoder-layers" and not compiler.undone
    assert report.compile_seconds == pytest.approx(60.0)
    assert report.reason.startswith("compiled: a step in 0.06 s against 0.1 s eagerly, faster; over a long run")
    slower = canned_times(monkeypatch, eager=0.1, first=5.12, compiled=0.12)
    assert not choose(slower, "auto").compiled and slower.undone


def test_auto_keeps_the_compiled_model_when_it_pays_back_over_the_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.1, first=30.06, compiled=0.06)
    report = choose(compiler, "auto", RunHorizon(seconds=1800))  # 18,000 eager steps
    assert report.compiled and report.eager_step_s == 0.1 and report.compiled_step_s == 0.06
    assert report.compile_seconds == pytest.approx(30.0)
    assert "it saves 720.0 s over the horizon's 1,800 s, more than the 30.0 s it took to compile" in report.reason
    by_tokens = canned_times(monkeypatch, eager=0.1, first=30.06, compiled=0.06)
    assert choose(by_tokens, "auto", RunHorizon(tokens=18_000_000)).compiled  # 18,000 steps of 1,000 tokens


def test_auto_goes_back_to_eager_when_the_compile_would_not_pay_back(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.1, first=60.06, compiled=0.06)
    report = choose(compiler, "auto", RunHorizon(seconds=60))
    assert compiler.compiled and compiler.undone and not report.compiled and report.scope is None
    assert report.reason == ("not compiled: a step in 0.06 s against 0.1 s eagerly: it saves 24.0 s over the "
                             "horizon's 60 s, less than the 60.0 s it took to compile")


def test_auto_does_not_even_try_on_a_horizon_too_short_to_pay_back(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.01, first=1.0, compiled=0.005)
    report = choose(compiler, "auto", RunHorizon(seconds=3))
    assert not compiler.compiled and not report.compiled and report.compile_seconds is None
    assert report.reason.startswith("not compiled: the horizon's 3 s take about 3.0 s eagerly; compiling takes at "
                                    "least 20 s and saves at most 50% of a step")


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
    assert row.compilation.reason.startswith("not compiled: on the CPU, compile: auto compiles only for a stated")
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
    choose_compiled_step(True, FakeCompiler(), lambda model: lambda index: None, [4, 7, 9],
                         RowSettings(None, tokens_per_step=1.0), CPU, Ranks())
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


def test_auto_on_the_cpu_compiles_only_for_a_stated_horizon(monkeypatch: pytest.MonkeyPatch) -> None:
    compiler = canned_times(monkeypatch, eager=0.1, first=60.06, compiled=0.06)
    settings = RowSettings(None, tokens_per_step=1000.0)
    report = choose_compiled_step("auto", compiler, lambda model: lambda index: None, [0], settings, CPU, Ranks())[1]
    assert report is not None and not compiler.compiled and not report.compiled
    assert report.reason.startswith("not compiled: on the CPU, compile: auto compiles only for a stated horizon")
    # A stated horizon over which the compiled step pays back: compiled on the CPU too.
    with_horizon = RowSettings(RunHorizon(seconds=1800), tokens_per_step=1000.0)
    report = choose_compiled_step("auto", compiler, lambda model: lambda index: None, [0], with_horizon, CPU,
                                  Ranks())[1]
    assert report is not None and compiler.compiled and report.compiled
    assert "over the horizon's 1,800 s" in report.reason
