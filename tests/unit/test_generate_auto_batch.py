"""`batch_size: auto` in a generate job on the CPU: the OOM probe in child processes under a memory budget,
then every row at the chosen size; a budget too small for one sequence fails every row with the reason."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.kinds.generate.report import render_table
from padbench.worker.jobs.generate import job
from padbench.worker.jobs.generate.job import run_generate_job
from padbench.worker.jobs.generate.sizing.probe import size_batch
from padbench.worker.jobs.probing.search import bracket_tolerance, choose_size

MIB = 2**20
TARGETS = "tests.integration.probe_targets:"


def auto_spec(budget: int, **fields: Any) -> GenerateJobSpec:
    return GenerateJobSpec.model_validate({
        "kind": "generate", "model": "tiny-llama", "batch_size": "auto", "attention": "sdpa", "dtype": "fp32",
        "device": "cpu", "cuda_graphs": False, "compile": False, "references": [],
        "data": {"source": "synthetic", "num_samples": 12, "max_length": 16, "seed": 0},
        "output_length": {"uniform": [2, 8]}, "probe": {"cpu_memory_budget_bytes": budget},
        "measurement": {"repeats": 1, "warmup_requests": 0, "correctness_samples": 2, "correctness_tokens": 4},
        **fields})


def quiet(fraction: float, message: str) -> None:
    pass


def test_every_row_of_the_job_runs_at_the_size_the_children_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch-free stand-in child whose limit is 30: each row, the reference included, runs at 29."""
    monkeypatch.setattr(job, "size_batch", functools.partial(size_batch, target=TARGETS + "fake_slots"))
    result = run_generate_job(auto_spec(64 * MIB, references=["transformers-generate"]), quiet)
    strategies, (reference,) = result.rows[:-1], result.rows[-1:]
    assert len(strategies) == 3 and reference.reference and reference.probe is None
    for row in result.rows:
        assert row.status == "ok", row.error
        assert row.batch_size == 29
    for row in strategies:
        assert row.probe is not None and (row.probe.largest_fit, row.probe.smallest_oom) == (30, 31)
        assert row.probe.chosen == 29 and not row.probe.cached


@pytest.mark.slow
def test_auto_probes_a_size_in_children_and_every_row_runs_at_it() -> None:
    messages: list[str] = []
    result = run_generate_job(auto_spec(32 * MIB), lambda _, message: messages.append(message))
    assert result.spec.batch_size == "auto"  # as submitted; the rows say the size
    probe = result.rows[0].probe
    assert probe is not None and probe.largest_fit >= 1 and probe.smallest_oom is not None
    assert probe.smallest_oom - probe.largest_fit <= bracket_tolerance(probe.largest_fit)
    assert probe.chosen == choose_size(probe.largest_fit, probe.smallest_oom, probe.margin, probe.cap)
    fits = [attempt for attempt in probe.probes if attempt.outcome == "fits"]
    assert {attempt.outcome for attempt in probe.probes} == {"fits", "oom"}
    assert all(a.peak_allocated_bytes is not None and a.peak_allocated_bytes <= 32 * MIB for a in fits)
    # Nothing above the largest fit ever runs: every row at the chosen size, none out of memory.
    for row in result.rows:
        assert row.status == "ok", row.error
        assert row.probe == probe and row.batch_size == probe.chosen <= probe.largest_fit
    assert any(message.startswith("probe 1: trying size 1") for message in messages)
    text = render_table(result)
    assert f"{probe.chosen} (auto)" in text and f"fit {probe.largest_fit}, OOM {probe.smallest_oom}" in text


def test_a_budget_too_small_for_one_sequence_fails_every_row_with_the_reason() -> None:
    result = run_generate_job(auto_spec(MIB, references=["transformers-generate"], strategies=["static"]), quiet)
    assert [(row.strategy, row.reference) for row in result.rows] == [("static", False),
                                                                      ("transformers-generate", True)]
    for row in result.rows:
        assert row.status == "failed" and row.batch_size is None and row.output_tokens_per_s is None
        assert row.error is not None and row.error.startswith("batch_size auto: even 1 sequence of 16 prompt")
        assert "--- child log ---" not in row.error
    assert result.num_requests == 12  # the job still returns a result
