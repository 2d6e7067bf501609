"""The padding runner end to end on the CPU, with a tiny GPT-2: every strategy and every kernel that runs here.

Sizes are chosen so that each job takes a few seconds on a shared two-core machine; the minima are low
(min_seconds 0) because these tests check the method, not the figures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from padbench.contract.registry import Registry
from padbench.contract.results import GpuActivity
from padbench.contract.spec import StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.kinds.padding.report import render_table
from padbench.worker.engine.attention import AttentionKernel, resolve_kernel
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch, PaddedBatch, PerSequence
from padbench.worker.engine.training import steps
from padbench.worker.engine.training.loss import ChunkedLoss, HeadWeights
from padbench.worker.engine.training.steps import next_token_labels
from padbench.worker.jobs.padding import setup, strategy_run, warmups
from padbench.worker.jobs.padding.job import run_padding_job, with_speedups
from padbench.worker.runtime.device import DeviceUnavailable, resolve_device

TINY_MODEL = {"config": {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 512, "n_positions": 64}}
MODEL_POSITIONS = TINY_MODEL["config"]["n_positions"]
ALL_STRATEGIES = ["static", "dynamic", {"name": "binned", "n_bins": 4}, "packed", "wrapped"]


@pytest.fixture(autouse=True)
def one_cpu_thread() -> Iterator[None]:
    """Tiny matmuls on a shared two-core machine run several times faster without OpenMP spin-waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_spec(**overrides: Any) -> PaddingJobSpec:
    document: dict[str, Any] = {
        "model": TINY_MODEL,
        "data": {"source": "synthetic", "max_length": 64, "num_samples": 24, "seed": 3},
        "strategies": ALL_STRATEGIES, "attention": "sdpa", "batch_size": 4, "dtype": "fp32", "device": "cpu",
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 2, "correctness_samples": 4,
                        "repeats": 1},
    }
    document.update(overrides)
    return PaddingJobSpec.model_validate(document)


def run(spec: PaddingJobSpec) -> PaddingResult:
    messages: list[tuple[float, str]] = []
    result = run_padding_job(spec, lambda fraction, message: messages.append((fraction, message)))
    fractions = [fraction for fraction, _ in messages]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    return result


def by_label(result: PaddingResult) -> dict[str, StrategyResult]:
    return {f"{row.label}:{row.attention}": row for row in result.strategies}


def assert_measured(row: StrategyResult, result: PaddingResult) -> None:
    assert row.status == "ok", row.error or row.invalid_reason
    assert row.correctness_passed and row.max_logit_error is not None and row.logit_tolerance is not None
    assert row.max_logit_error <= row.logit_tolerance
    assert row.tokens_per_s and row.tokens_per_s > 0 and row.median_batch_tokens_per_s and row.p90_batch_tokens_per_s
    # Whole passes over the same sequences: every strategy measured a multiple of the job's real tokens.
    assert row.real_tokens is not None and row.real_tokens % result.real_tokens_total == 0
    assert row.computed_tokens is not None and row.padding_efficiency == row.real_tokens / row.computed_tokens
    assert row.memory is not None and row.memory.host_peak_rss_bytes and row.memory.peak_allocated_bytes is None
    assert row.mfu is None  # no CPU peak is tabulated, so no MFU is invented
    assert (row.step_split is not None) == (result.spec.mode == "training")  # the phases of a training step only


@pytest.mark.parametrize("attention", ["sdpa", "eager", "flex"])
def test_every_strategy_on_every_cpu_kernel(attention: str) -> None:
    result = run(tiny_spec(attention=attention))
    rows = by_label(result)
    for row in result.strategies:
        assert_measured(row, result)
    assert rows[f"packed:{attention}"].padding_efficiency == 1.0
    wrapped = rows[f"wrapped:{attention}"]  # gated against its own rows: only the stream's last row pads
    assert wrapped.crosses_documents and not rows[f"packed:{attention}"].crosses_documents
    assert wrapped.padding_efficiency is not None and wrapped.padding_efficiency > 0.9
    assert rows[f"static:{attention}"].speedup_vs_static == 1.0
    assert rows[f"packed:{attention}"].kernel.endswith("mask")  # the kernel that ran, not the name asked for
    assert result.num_sequences == 24 and result.model_parameters > 0 and result.flops_per_token > 0
    assert result.environment.dataset_digest and result.environment.seeds["data"] == 3


def test_real_corpus_and_tokenizer(corpus_file: Path, tokenizer_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the tokenized-corpus cache stays in the test's folder
    model = {"config": {**TINY_MODEL["config"], "vocab_size": 30522}}
    data = {"source": str(corpus_file), "tokenizer": str(tokenizer_dir), "max_length": 64, "num_samples": 16}
    result = run(tiny_spec(model=model, data=data, strategies=["static", "packed"]))
    for row in result.strategies:
        assert_measured(row, result)
    assert result.environment.datasets is not None and result.environment.transformers is not None


def test_an_unavailable_kernel_fails_only_its_strategy(caplog: pytest.LogCaptureFixture) -> None:
    # In bf16 on the CPU torch's SDPA flash backend runs for padded rows, but its varlen kernel does not.
    result = run(tiny_spec(dtype="bf16", attention="flash", strategies=["static", "packed"]))
    static, packed = result.strategies
    assert_measured(static, result)
    assert static.kernel == "torch-flash"
    assert packed.status == "failed" and packed.tokens_per_s is None
    assert packed.error is not None and "no flash implementation runs on cpu" in packed.error
    # The row keeps one line; the job's log keeps the whole traceback, for errors found only in its frames.
    logged = [record for record in caplog.records if record.getMessage().startswith("packed / ")]
    assert len(logged) == 1 and logged[0].exc_info is not None


def test_a_run_shorter_than_the_minima_is_invalid_and_has_no_throughput() -> None:
    spec = tiny_spec(strategies=["packed"], measurement={"warmup_batches": 0, "min_seconds": 0.0,
                                                         "min_batches": 50, "max_batches": 3})
    row = run(spec).strategies[0]
    assert row.status == "invalid" and row.invalid_reason == "repeat 1: measured 3 batches, fewer than min_batches=50"
    assert row.tokens_per_s is None and row.median_batch_tokens_per_s is None and row.speedup_vs_static is None
    assert row.batches == 9 and row.correctness_passed  # 3 per repeat: what was measured is still recorded


class PositionsRunOn(AttentionKernel):
    """A deliberately broken packing: position ids count on across sequence boundaries.

    (Wrapped at the model's position count, so the bug shows as wrong logits rather than an IndexError.)
    """

    def __init__(self, inner: AttentionKernel) -> None:
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]

    def prepare(self, batch: Batch, windows: tuple[int | None, ...] = (None,)) -> Batch:
        assert isinstance(batch, PackedBatch)
        positions = torch.arange(batch.computed_tokens, device=batch.input_ids.device)[None] % MODEL_POSITIONS
        return self.inner.prepare(replace(batch, position_ids=positions), windows)

    def forward(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return self.inner.forward(model, batch)

    def model_inputs(self, batch: Batch) -> dict[str, Any]:
        return self.inner.model_inputs(batch)

    def attend(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError


def test_the_gate_fails_a_broken_packing_and_the_job_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve_broken(name: Any, layout: Any, device: torch.device, dtype: torch.dtype) -> AttentionKernel:
        kernel = resolve_kernel(name, layout, device, dtype)
        return PositionsRunOn(kernel) if layout is PackedBatch else kernel

    monkeypatch.setattr(strategy_run, "resolve_kernel", resolve_broken)
    result = run(tiny_spec(strategies=["packed", "static"]))
    packed, static = result.strategies
    assert packed.status == "failed" and packed.correctness_passed is False
    assert packed.error is not None and packed.error.startswith("correctness gate: logits differ")
    assert packed.max_logit_error is not None and packed.logit_tolerance is not None
    assert packed.max_logit_error > 10 * packed.logit_tolerance and packed.tokens_per_s is None
    assert_measured(static, result)


class OvercountingStatic(PerSequence):
    """A strategy whose batches claim more real tokens than they can hold: a corrupt count must fail the row."""

    def __init__(self) -> None:
        self.inner = STRATEGIES.get("static")
        self.layout = self.inner.layout

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, *args: Any) -> Iterator[Batch]:
        for batch in self.inner.batches(sequences, spec, *args):
            yield replace(batch, lengths=(10**9, *batch.lengths[1:]))


def test_a_corrupt_token_count_fails_the_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    registry: Registry[Any] = Registry("strategy")
    registry.add("static", OvercountingStatic())
    registry.add("packed", STRATEGIES.get("packed"))
    monkeypatch.setattr(strategy_run, "STRATEGIES", registry)
    result = run(tiny_spec(strategies=["static", "packed"]))
    static, packed = result.strategies
    assert static.status == "failed" and static.error is not None and "above rows × max_length" in static.error
    assert_measured(packed, result)
    assert packed.speedup_vs_static is None  # no valid static row, so no ratio


def test_training_mode_restores_the_weights_between_strategies() -> None:
    # The second strategy's gate compares with the reference taken before any training step: it passes
    # only if the first strategy's AdamW updates were undone.
    result = run(tiny_spec(mode="training", strategies=["packed", "binned"]))
    for row in result.strategies:
        assert_measured(row, result)


@pytest.mark.parametrize(("loss", "name"), [("fused", "chunked-linear-cross-entropy"), ("full", "full-logits")])
def test_training_rows_run_the_loss_asked_for_and_split_their_step(monkeypatch: pytest.MonkeyPatch, loss: str,
                                                                   name: str) -> None:
    losses: list[str | None] = []
    measure_row = strategy_run.StrategyRun.run

    def run_row(self: strategy_run.StrategyRun) -> StrategyResult:
        losses.append(self.job.loss_name)
        return measure_row(self)

    monkeypatch.setattr(strategy_run.StrategyRun, "run", run_row)
    result = run(tiny_spec(mode="training", model={"preset": "tiny-llama"}, strategies=["static", "packed"],
                           training={"loss": loss}))
    assert losses == [name, name]
    for row in result.strategies:
        assert_measured(row, result)
        split = row.step_split
        assert split is not None and split.steps == 3
        assert split.forward_s > 0 and split.backward_s > 0 and split.optimizer_s > 0


def test_a_training_row_without_diagnostics_keeps_its_figures_and_leaves_the_split_out() -> None:
    spec = tiny_spec(mode="training", model={"preset": "tiny-llama"}, strategies=["packed"])
    result = run(spec.model_copy(update={"measurement": spec.measurement.model_copy(update={"diagnostics": False})}))
    row = result.strategies[0]
    assert row.status == "ok" and row.tokens_per_s and row.step_split is None


class ScaledHeadLoss(ChunkedLoss):
    """A fused loss that gets the head wrong: what the loss gate is there to catch."""

    name = "scaled-head"

    def fused(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              head: HeadWeights) -> torch.Tensor:
        return super().fused(hidden, 1.5 * weight, bias, labels, head)


def test_a_fused_loss_that_misses_the_full_logits_fails_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setup, "resolve_loss", lambda choice, device: ScaledHeadLoss())
    result = run(tiny_spec(mode="training", strategies=["static", "packed"]))
    for row in result.strategies:
        assert row.status == "failed" and row.correctness_passed  # the layout is right, the loss is not
        assert row.error is not None and row.error.startswith("loss check: scaled-head: loss ")


@pytest.mark.slow  # compiles the model with torch.compile (about 5 s)
def test_compiled_model_serves_every_batch_shape_without_recompiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps, "COMPILE_BACKEND", "eager")  # dynamo traces and guards as with inductor, faster
    result = run(tiny_spec(compile=True, strategies=[{"name": "binned", "n_bins": 4}, "packed"]))
    for row in result.strategies:
        assert_measured(row, result)
        assert row.compilation is not None and row.compilation.compiled and row.compilation.scope == "model"
        assert row.compilation.compile_seconds is not None  # timed apart, before the warm-up


@pytest.mark.slow  # compiles the model with torch.compile (about 5 s)
def test_a_recompile_inside_the_measurement_invalidates_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # Static shapes, and a warm-up that misses shapes (a compiled row's warm-up runs every shape, so that this
    # does not happen): each new binned width compiles a new graph, here inside the measurement.
    monkeypatch.setattr(steps, "compiled", lambda model: torch.compile(model, backend="eager", dynamic=False))
    monkeypatch.setattr(warmups, "first_of_each_shape", lambda batches: [])
    monkeypatch.setattr(warmups, "extreme_batches", lambda batches: [])
    row = run(tiny_spec(compile=True, strategies=[{"name": "binned", "n_bins": 2}])).strategies[0]
    assert row.status == "invalid" and row.tokens_per_s is None
    assert row.invalid_reason is not None and "during the measurement" in row.invalid_reason


def test_a_kernel_compiling_its_own_op_inside_the_measurement_invalidates_an_uncompiled_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # FlexAttention compiles its op on CUDA even where the model runs eagerly; here sdpa's op stands in for it,
    # compiled for static shapes, and the warm-up misses shapes, so each new binned width compiles a graph.
    kernel = type(resolve_kernel("sdpa", PaddedBatch, torch.device("cpu"), torch.float32))
    compiled_op = torch.compile(kernel.masked_op, backend="eager", dynamic=False)
    monkeypatch.setattr(kernel, "masked_op", staticmethod(lambda *args, **kwargs: compiled_op(*args, **kwargs)))
    monkeypatch.setattr(warmups, "first_of_each_shape", lambda batches: [])
    monkeypatch.setattr(warmups, "extreme_batches", lambda batches: [])
    torch._dynamo.reset()
    row = run(tiny_spec(strategies=[{"name": "binned", "n_bins": 2, "attention": "sdpa"}])).strategies[0]
    assert row.compilation is None or not row.compilation.compiled
    assert row.status == "invalid" and row.invalid_reason is not None and "during the measurement" in row.invalid_reason


def test_flex_on_padded_rows_warms_up_on_every_batch_shape() -> None:
    assert resolve_kernel("flex", PaddedBatch, torch.device("cpu"), torch.float32).compiles_per_shape


def test_device_resolution() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable, match="device: 'cuda'"):
            resolve_device("cuda")


def _row(strategy: str, attention: str, tokens_per_s: float | None) -> StrategyResult:
    return StrategyResult(strategy=strategy, attention=attention, kernel=attention, batch_size=8,
                          status="ok" if tokens_per_s else "invalid", tokens_per_s=tokens_per_s)


def test_speedups_compare_with_the_static_row_of_the_same_attention() -> None:
    rows = with_speedups([_row("static", "flash", 100.0), _row("static", "sdpa", 50.0),
                          _row("packed", "flash", 600.0), _row("packed", "eager", 80.0), _row("binned", "sdpa", None)])
    assert [row.speedup_vs_static for row in rows] == [1.0, 1.0, 6.0, 0.8, None]
    assert with_speedups([_row("packed", "flash", 600.0)])[0].speedup_vs_static is None
    # A batch-size list gives a static row per size: the others compare with the fastest of them.
    sizes = with_speedups([_row("static", "flash", 50.0), _row("static", "flash", 100.0),
                           _row("packed", "flash", 300.0)])
    assert [row.speedup_vs_static for row in sizes] == [0.5, 1.0, 3.0]


def test_what_the_gpu_sampler_saw_while_timing_goes_into_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = GpuActivity(samples=12, interval_s=0.05, other_processes_max=1, contended_share=0.5,
                       own_process_identified=True, contended=True, contention_allowed=False)
    windows: list[bool] = []

    @contextlib.contextmanager
    def sampler(device: torch.device, *, allow_contention: bool) -> Iterator[list[GpuActivity]]:
        windows.append(allow_contention)
        yield [seen]

    monkeypatch.setattr(strategy_run, "sample_gpu_activity", sampler)
    result = run(tiny_spec(strategies=["static", "packed"]))
    assert windows == [False, False] and all(row.gpu_activity == seen for row in result.strategies)
    assert "contended [1]" in render_table(result) and "verdict: none" in render_table(result)


def test_repeats_give_each_row_its_spread() -> None:
    spec = tiny_spec(strategies=["static"], measurement={"warmup_batches": 0, "min_seconds": 0.0, "min_batches": 2,
                                                         "correctness_samples": 2, "repeats": 3})
    row = run(spec).strategies[0]
    assert row.status == "ok" and row.spread is not None and row.spread.repeats == 3
    assert row.repeat_tokens_per_s is not None and len(row.repeat_tokens_per_s) == 3
    assert row.spread.min_tokens_per_s == min(row.repeat_tokens_per_s)
    assert row.spread.ci95_low_tokens_per_s <= row.spread.mean_tokens_per_s <= row.spread.ci95_high_tokens_per_s
    assert row.spread.noisy == (row.spread.cv > 0.05) and row.gpu_activity is None  # no GPU: nothing sampled


def test_training_labels_never_cross_a_sequence_or_predict_padding() -> None:
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, 0]])
    padded = PaddedBatch(ids, (ids != 0).long(), (3, 2), (0, 1))
    assert next_token_labels(padded).tolist() == [[6, 7, -100, -100], [9, -100, -100, -100]]
    pack_ids = torch.tensor([[5, 6, 7, 8, 9]])
    pack = PackedBatch(pack_ids, torch.tensor([[0, 1, 2, 0, 1]]), torch.tensor([0, 3, 5], dtype=torch.int32), 3,
                       (3, 2), (0, 1), token_budget=6)
    assert next_token_labels(pack).tolist() == [[6, 7, -100, 9, -100]]


def test_a_kernel_that_compiles_per_shape_warms_up_once_on_every_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    # flash-attn-4 JIT-compiles each new shape: a warm-up that missed a shape would time compilation, and one
    # that ran every batch would cost a whole pass (minutes for an 8B model's 500 equal batches).
    kernel = resolve_kernel("sdpa", PaddedBatch, torch.device("cpu"), torch.float32)
    monkeypatch.setattr(type(kernel), "compiles_per_shape", True)
    seen_warmups: list[list[int]] = []
    built: list[list[Batch]] = []
    real_measure, real_build = strategy_run.measure, strategy_run.StrategyRun._build_batches
    monkeypatch.setattr(strategy_run, "measure", lambda *args, **kwargs: (
        seen_warmups.append(list(kwargs["warmup"])), real_measure(*args, **kwargs))[1])
    monkeypatch.setattr(strategy_run.StrategyRun, "_build_batches", lambda *args, **kwargs: (
        built.append(real_build(*args, **kwargs)), built[-1])[1])
    messages: list[str] = []
    result = run_padding_job(tiny_spec(strategies=["static", {"name": "binned", "n_bins": 4}]),
                             lambda fraction, message: messages.append(message))
    assert "static / sdpa: warm-up (1 batches)" in messages  # six batches of one shape (4 × 64)
    shapes = [batch.shape_key for batch in built[-1]]  # binned, the last strategy
    assert len(set(shapes)) > 1 and {shapes[index] for index in seen_warmups[-1]} == set(shapes)
    assert len(seen_warmups[-1]) == len(set(shapes))  # once per shape
    assert all(row.status == "ok" for row in result.strategies)
