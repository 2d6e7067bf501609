"""A padding job on two ranks (gloo, CPU processes) against the same job in one process.

The ranks split the same sequences, so every layout's two ranks together process exactly the tokens one
process does, and the group's row carries each rank's share; training shards the model with FSDP2, whose
first loss must be the loss one process computes.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingResult
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.worker.jobs import spec_json
from padbench.worker.runtime.launcher import launch_job

pytestmark = pytest.mark.slow  # each job starts Python processes that import torch and transformers

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
STRATEGIES = ["static", "dynamic", {"name": "binned", "n_bins": 2}, "packed"]


def spec(mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "padding", "mode": mode, "model": {"preset": "tiny-llama"},
        # 32 sequences in batches of 4 and packs of 4 × 64 tokens: every layout's batches split evenly
        "data": {"source": "synthetic", "max_length": 64, "num_samples": 32, "seed": 5},
        "strategies": STRATEGIES, "attention": "sdpa", "batch_size": 4, "dtype": "fp32", "device": "cpu",
        # one pass over the batches: every sequence once
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 2,
                        "repeats": 1},
        **extra,
    }


def run(document: dict[str, Any], ranks: int, tmp_path: Path) -> PaddingResult:
    report = launch_job("padbench.worker.jobs:run_job", spec_json(parse_job_spec(document)), ranks=ranks,
                        timeout_s=400, env=CPU_ONLY, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    return PaddingResult.model_validate(report.value)


@pytest.mark.parametrize(("mode", "parallelism"), [("inference", "replicated"), ("training", "sharded")])
def test_two_ranks_process_the_tokens_of_one_process(tmp_path: Path, mode: str, parallelism: str) -> None:
    alone = run(spec(mode), 1, tmp_path)
    pair = run(spec(mode, gpus=2), 2, tmp_path)
    assert alone.parallel is None
    assert pair.parallel is not None and pair.parallel.gpus == 2 and pair.parallel.backend == "gloo"
    assert pair.parallel.parallelism == parallelism and pair.parallel.devices == ["cpu", "cpu"]
    for single, group in zip(alone.strategies, pair.strategies, strict=True):
        assert (single.status, group.status) == ("ok", "ok"), (group.label, group.error)
        assert group.per_rank is not None
        ranks = group.per_rank.ranks
        assert [rank.rank for rank in ranks] == [0, 1]
        assert group.real_tokens == sum(rank.real_tokens for rank in ranks)
        if group.strategy == "packed":  # packs dealt one per rank a step: an odd pack out is left out
            assert group.per_rank.batches_left_out <= 1 and group.real_tokens <= single.real_tokens
        else:  # global batches of 8 rows, 4 a rank: the two ranks process exactly what one process does
            assert group.per_rank.batches_left_out == 0 and group.real_tokens == single.real_tokens
            assert ranks[0].computed_tokens == ranks[1].computed_tokens  # a step's rows share one width
        # each step's work dealt: the ranks' real tokens within one sequence's length (64) in every step
        assert group.per_rank.largest_step_gap_tokens is not None and group.per_rank.largest_step_gap_tokens <= 64
        assert group.per_rank.work_imbalance is not None and group.per_rank.work_imbalance < 0.25
        assert all(rank.collective_seconds_per_step is not None for rank in ranks)
        assert group.per_rank.tokens_per_s_per_gpu == pytest.approx(group.tokens_per_s / 2)
        assert (group.step_split is not None) == (mode == "training")  # the ranks' mean phase times
    text = render_table(pair)
    sharded = "sharded (FSDP2, reshards after forward, explicit prefetch)"  # the defaults, read from the layers
    assert f"on 2 processes: {sharded if mode == 'training' else 'replicated'}" in text
    assert "tokens/s per GPU, work imbalance " in text and "  rank 1 (cpu): " in text
    assert {row["ranks"] for row in csv_rows(pair)} == {2}


def test_four_ranks_get_the_same_tokens_in_every_step_within_one_sequence(tmp_path: Path) -> None:
    """Each step's rows (or packs) dealt across four ranks: the row states every rank's work and how far apart
    the ranks were, never more than one sequence's length (64 tokens) within a step."""
    four = run(spec("inference", gpus=4, strategies=["dynamic", "packed"], batch_size=2), 4, tmp_path)
    for row in four.strategies:
        assert row.status == "ok" and row.per_rank is not None, row.error
        assert len(row.per_rank.ranks) == 4 and row.per_rank.largest_step_gap_tokens is not None
        assert row.per_rank.largest_step_gap_tokens <= 64, row.label
        work = [rank.computed_tokens for rank in row.per_rank.ranks]
        assert all(tokens is not None and tokens > 0 for tokens in work)
        if row.strategy == "dynamic":  # every rank's rows of a step at the step's width: the same work
            assert len(set(work)) == 1 and row.per_rank.work_imbalance == 0
    assert "at most" in render_table(four) and "tokens apart in a step" in render_table(four)


@pytest.mark.parametrize(("precision", "tolerance"), [("auto", 1e-5), ("amp", 2e-2)])
def test_a_sharded_model_starts_from_the_loss_of_one_process(tmp_path: Path, precision: str,
                                                             tolerance: float) -> None:
    document = spec("training", training={"precision": precision},
                    dtype="fp32" if precision == "auto" else "bf16", attention="eager")
    tokens = [[(7 * row + 3 * column) % 500 + 1 for column in range(48)] for row in range(3)]
    target = "tests.integration.rank_jobs:first_training_loss"
    alone = launch_job(target, {**document, "training": {"precision": "amp"}} if precision == "amp" else document,
                       tokens, ranks=1, timeout_s=300, env=CPU_ONLY, workdir=str(tmp_path))
    pair = launch_job(target, {**document, "gpus": 2}, tokens, ranks=2, timeout_s=300, env=CPU_ONLY,
                      workdir=str(tmp_path))
    assert alone.outcome == "ok" and pair.outcome == "ok", (alone.error, pair.error)
    assert pair.value == pytest.approx(alone.value, rel=tolerance)


LORA_AND_CHECKPOINTING = {"method": "lora", "activation_checkpointing": "full", "lora": {"r": 4}}


def test_lora_with_checkpointing_trains_sharded_from_the_loss_of_one_process(tmp_path: Path) -> None:
    """FSDP2 over a frozen base with trainable adapters, each decoder layer recomputed in the backward: the
    sharded job measures every layout, and its first loss and backward are those of one process."""
    document = spec("training", training=LORA_AND_CHECKPOINTING)
    pair = run({**document, "gpus": 2}, 2, tmp_path)
    assert [row.status for row in pair.strategies] == ["ok"] * len(STRATEGIES), [r.error for r in pair.strategies]
    tokens = [[(7 * row + 3 * column) % 500 + 1 for column in range(48)] for row in range(3)]
    target = "tests.integration.rank_jobs:first_training_loss"
    alone = launch_job(target, {**document, "attention": "eager"}, tokens, ranks=1, timeout_s=300, env=CPU_ONLY,
                       workdir=str(tmp_path))
    sharded = launch_job(target, {**document, "attention": "eager", "gpus": 2}, tokens, ranks=2, timeout_s=300,
                         env=CPU_ONLY, workdir=str(tmp_path))
    assert alone.outcome == "ok" and sharded.outcome == "ok", (alone.error, sharded.error)
    assert sharded.value == pytest.approx(alone.value, rel=1e-5)


# A tied head in fp32 (its weight is the embedding's), an untied one under amp: the two ways the head's
# weight reaches the loss through FSDP2.
@pytest.mark.parametrize(("preset", "precision", "tolerance"),
                         [("tiny-gpt2", "auto", 1e-5), ("tiny-llama", "amp", 3e-2)])
def test_the_fused_loss_of_a_sharded_model_is_the_full_loss(tmp_path: Path, preset: str, precision: str,
                                                            tolerance: float) -> None:
    """Through FSDP2 the fused loss gets the gathered head (untied, or tied to the embedding) and its weight's
    gradient is reduce-scattered like every other: each rank's gradient shards are the full logits' ones."""
    document = spec("training", model={"preset": preset}, gpus=2, training={"precision": precision},
                    dtype="fp32" if precision == "auto" else "bf16", attention="eager")
    tokens = [[(11 * row + 5 * column) % 400 + 1 for column in range(40)] for row in range(2)]
    report = launch_job("tests.integration.rank_jobs:fused_against_full", document, tokens, ranks=2, timeout_s=300,
                        env=CPU_ONLY, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    assert report.value["loss_error"] <= tolerance and report.value["gradient_error"] <= 10 * tolerance, report.value


def test_compiled_layers_of_a_sharded_model_train_as_the_eager_ones(tmp_path: Path) -> None:
    """Each decoder layer compiled in place under FSDP2, checkpointed (the harder case: a checkpointed layer
    compiles whole, with its recompute; the whole job below compiles layers without): the gathering hooks run
    eagerly around the compiled graph, and the step's loss and each rank's reduce-scattered gradient shards
    are the eager model's."""
    document = spec("training", gpus=2, attention="eager", training={"activation_checkpointing": "ops"})
    tokens = [[(13 * row + 7 * column) % 400 + 1 for column in range(40)] for row in range(2)]
    report = launch_job("tests.integration.rank_jobs:compiled_against_eager", document, tokens, "aot_eager",
                        ranks=2, timeout_s=300, env=CPU_ONLY, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    assert report.value["layers"] >= 2 and report.value["gradients"] > 0
    assert report.value["loss_error"] <= 1e-5 and report.value["gradient_error"] <= 1e-4, report.value


def test_a_compiled_sharded_row_warms_up_every_ranks_shapes_in_step(tmp_path: Path) -> None:
    """Each rank warms its compiled layers up on its own batches' shapes, which differ between the ranks (a
    step's packs hold unequal token counts, so the ranks' packs have different shapes): the warm-ups are made
    equally long, so no rank steps into a collective alone."""
    document = spec("training", gpus=2, attention="eager", compile=True, strategies=["packed"],
                    data={"source": "synthetic", "max_length": 64, "num_samples": 32, "seed": 5})
    # dynamo's `eager` backend: tracing and guards as inductor's, none of its code generation; what is tested
    # is how many steps each rank takes.
    report = launch_job("tests.integration.rank_jobs:run_job_compiling_with", spec_json(parse_job_spec(document)),
                        "eager", ranks=2,
                        timeout_s=300, env=CPU_ONLY, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    [row] = PaddingResult.model_validate(report.value).strategies
    assert row.status == "ok", row.error
    assert row.compilation is not None and row.compilation.compiled and row.per_rank is not None


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gpt2"])  # an untied aligned head; a tied one
def test_a_model_too_large_for_one_gpu_is_built_sharded_from_its_shapes(tmp_path: Path, preset: str) -> None:
    tokens = [[(5 * row + column) % 400 + 1 for column in range(32)] for row in range(2)]
    report = launch_job("tests.integration.rank_jobs:sharded_from_shapes", preset, tokens, ranks=2, timeout_s=300,
                        env=CPU_ONLY, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    assert report.value["finite"]
    assert report.value["loss"] == pytest.approx(math.log(report.value["vocab"]), rel=0.1)


def test_batch_size_auto_is_probed_on_every_rank_and_agreed(tmp_path: Path) -> None:
    """Training shards the model, so the ranks' probe children shard it among themselves (the harder case: a
    replicated model's children probe alone and only their readings are agreed)."""
    document = spec("training", gpus=2, batch_size="auto", strategies=["static"],
                    probe={"cpu_memory_budget_bytes": 2**30, "cap": 16})
    result = run(document, 2, tmp_path)
    [row] = result.strategies
    assert row.status == "ok", row.error
    assert row.probe is not None and row.probe.chosen == row.batch_size and row.probe.largest_fit >= 1
    assert row.probe.cached is False and row.per_rank is not None


def test_ranks_of_a_job_naming_no_attention_run_the_kernel_rank_0_picked(tmp_path: Path) -> None:
    document = {key: value for key, value in spec("inference", gpus=2, strategies=["static"]).items()
                if key != "attention"}
    pair = run(document, 2, tmp_path)
    assert pair.spec.attention == "auto" and pair.attention_auto is not None
    assert [(pick.entry, pick.chosen) for pick in pair.attention_auto] == [("padded", "sdpa")]  # the CPU's default
    assert [(row.attention, row.status) for row in pair.strategies] == [("sdpa", "ok")]
