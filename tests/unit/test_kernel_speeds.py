"""The worker's table of measured kernel speeds: recording, and the rules by which `attention: auto` picks."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from padbench.contract.results import Environment, ProbeReport
from padbench.kinds.attention.contract import AttentionCell, AttentionResult
from padbench.kinds.generate.contract import GenerateResult
from padbench.kinds.padding.contract import StrategyResult
from padbench.kinds.tune.contract import Finalist, TuneConfig, TuneResult, TuneTrial
from padbench.worker.runtime.kernel_evidence import figures_of, record_result
from padbench.worker.runtime.kernel_speeds import (
    MAX_AGE_DAYS,
    Figure,
    KernelSpeeds,
    Place,
    Query,
    band_text,
    length_band,
    pick_family,
)
from tests.generate_result import generate_result, row
from tests.regression_results import document, padding_result

H100 = "NVIDIA H100 80GB HBM3"
NOW = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
PACKED = Place("padding", H100, "bf16", "inference", "packed")
CANDIDATES = ("torch-flash", "eager", "flex", "sdpa")  # the static default's order: flash implementations first


def figure(family: str, rate: float, *, source: str = "job 42", at: str = "2026-11-27T10:00:00+00:00",
           setting: str = "packed · batch 32", model: str = "m1", band: int = 1, place: Place = PACKED) -> Figure:
    return Figure(place=place, band=band, model=model, model_digest=model, setting=setting, family=family,
                  kernel=family, rate=rate, metric="tokens/s", source=source, measured_at=at, torch="2.13.0")


def query(*, band: int = 1, model: str = "m1", candidates: tuple[str, ...] = CANDIDATES) -> Query:
    return Query(PACKED, band, model, candidates, "flash")


def test_length_bands_reach_four_times_further_each() -> None:
    assert [length_band(n) for n in (1, 512, 513, 2048, 2049, 8192, 100_000)] == [0, 0, 1, 1, 2, 2, 4]
    assert band_text(1) == "max_length ≤ 2,048"


def test_without_a_comparison_the_static_default_runs_and_says_so() -> None:
    pick = pick_family([], query(), NOW)
    assert (pick.family, pick.measured) == ("flash", False)
    assert pick.reason.startswith(f"no measurement comparing kernels for this job's kind, dtype, mode and layout on "
                                  f"{H100}: the default, flash")
    # One family measured alone compares it with nothing: still the default.
    assert not pick_family([figure("flex", 18_100.0)], query(), NOW).measured


def test_the_fastest_family_of_a_comparison_wins_and_says_where_it_was_measured() -> None:
    pick = pick_family([figure("sdpa", 15_000.0), figure("flex", 18_100.0)], query(), NOW)
    assert (pick.family, pick.measured) == ("flex", True)
    assert pick.reason == (f"fastest measured: flex 18.1k tokens/s vs sdpa 15.0k (packed · batch 32) on {H100} in "
                           "job 42 on 2026-11-27")
    assert pick.fastest is not None and pick.runner_up is not None and pick.runner_up.family == "sdpa"


def test_rows_of_two_jobs_with_the_same_setting_compare() -> None:
    measured = [figure("sdpa", 15_000.0, source="job 7"), figure("flex", 18_100.0, source="job 9")]
    assert "in job 9 and job 7 on" in pick_family(measured, query(), NOW).reason


def test_a_tie_within_two_percent_goes_to_the_default_s_preference() -> None:
    pick = pick_family([figure("flex", 10_150.0), figure("torch-flash", 10_000.0)], query(), NOW)
    assert pick.family == "torch-flash" and "a tie within 2%" in pick.reason
    assert pick_family([figure("flex", 10_300.0), figure("torch-flash", 10_000.0)], query(), NOW).family == "flex"


def test_stale_figures_and_families_that_cannot_run_here_are_passed_over() -> None:
    stale = [figure("sdpa", 1.0, at="2026-01-01T00:00:00+00:00"), figure("flex", 2.0, at="2026-01-01T00:00:00+00:00")]
    assert (NOW - datetime(2026, 1, 1, tzinfo=timezone.utc)).days > MAX_AGE_DAYS
    assert not pick_family(stale, query(), NOW).measured
    measured = [figure("flash-attn", 30_000.0), figure("flex", 18_100.0), figure("sdpa", 15_000.0)]
    assert pick_family(measured, query(), NOW).family == "flex"  # flash-attn is not installed here


def test_only_the_same_kind_device_dtype_mode_and_layout_count() -> None:
    for place in (replace(PACKED, device="NVIDIA A100-SXM4-80GB"), replace(PACKED, dtype="fp16"),
                  replace(PACKED, mode="training"), replace(PACKED, entry="padded"), replace(PACKED, kind="generate")):
        assert not pick_family([figure("sdpa", 1.0, place=place), figure("flex", 2.0, place=place)], query(),
                               NOW).measured


def test_nearest_band_then_same_model_then_newest() -> None:
    other_band = [figure("flex", 2.0, band=3, setting="a"), figure("sdpa", 1.0, band=3, setting="a")]
    other_model = [figure("sdpa", 2.0, model="m2", setting="b"), figure("flex", 1.0, model="m2", setting="b")]
    older = [figure("eager", 2.0, setting="c", at="2026-11-20T00:00:00+00:00"),
             figure("sdpa", 1.0, setting="c", at="2026-11-20T00:00:00+00:00")]
    newer = [figure("flex", 2.0, setting="d"), figure("eager", 1.0, setting="d")]
    assert pick_family(other_band + other_model, query(), NOW).family == "sdpa"  # same band, another model
    assert "model m2" in pick_family(other_band + other_model, query(), NOW).reason
    assert pick_family(other_band, query(), NOW).reason.endswith(
        f"(a; measured at max_length ≤ 32,768, this job max_length ≤ 2,048) on {H100} in job 42 on 2026-11-27")
    assert pick_family(other_model + older + newer, query(), NOW).family == "flex"  # same model, newest


def test_the_table_keeps_the_newest_figure_of_each_slot(tmp_path: Path) -> None:
    table = KernelSpeeds(tmp_path / "state" / "kernel-speeds.json")
    assert table.figures() == []  # no file yet
    table.record([figure("sdpa", 1.0, source="job 1"), figure("flex", 2.0, source="job 1")])
    table.record([figure("sdpa", 3.0, source="job 2")])
    assert sorted((f.family, f.rate, f.source) for f in table.figures()) == [("flex", 2.0, "job 1"),
                                                                            ("sdpa", 3.0, "job 2")]
    kept = json.loads(table.path.read_text())
    table.path.write_text(json.dumps({"figures": [*kept["figures"], {"family": "flex"},
                                                  {**kept["figures"][0], "measured_at": "yesterday"}]}))
    assert len(table.figures()) == 2  # an entry it cannot read is left out
    table.path.write_text("{not json")
    assert table.figures() == []  # unreadable: empty, and the next record starts it again
    table.record([figure("sdpa", 1.0)])
    assert len(table.figures()) == 1


def test_a_padding_result_adds_each_valid_row_under_its_layout(tmp_path: Path) -> None:
    result = padding_result({"static": [1000.0], "packed": [2000.0]},
                            spec={"device": "cpu", "dtype": "fp32", "attention": "sdpa"})
    failed = StrategyResult(strategy="packed", attention="flash", kernel="torch-flash-varlen", batch_size=8,
                            status="failed", error="no flash implementation runs on cpu")
    flash = StrategyResult(strategy="static", attention="flash", kernel="torch-flash", batch_size=8, status="ok",
                           tokens_per_s=900.0)
    result = result.model_copy(update={"strategies": [*result.strategies, failed, flash]})
    figures = figures_of(result, "job 3")
    assert [(f.place.entry, f.family, f.rate, f.setting) for f in figures] == [
        ("padded", "sdpa", 1000.0, "static · batch 8 · compile auto"),
        ("packed", "sdpa", 2000.0, "packed · batch 8 · compile auto"),
        ("padded", "torch-flash", 900.0, "static · batch 8 · compile auto")]  # `flash` as the family that ran
    assert {(f.place.device, f.place.dtype, f.place.mode, f.source) for f in figures} == {
        ("cpu", "fp32", "inference", "job 3")}
    assert record_result(document(result), "job 3", tmp_path / "t.json") == 3
    assert record_result({"kind": "padding"}, "job 4", tmp_path / "t.json") == 0  # not a result: nothing kept


def test_a_generate_result_adds_its_strategy_rows_not_the_references() -> None:
    result: GenerateResult = generate_result([row("static", [100.0]), row("transformers-generate", [50.0],
                                                                          reference=True, kernel="transformers-sdpa")])
    figures = figures_of(result, "job 5")
    assert [(f.place.kind, f.place.entry, f.family, f.metric) for f in figures] == [
        ("generate", "decode", "sdpa", "output tokens/s")]


def test_a_tune_adds_each_kernel_s_best_finalist() -> None:
    environment = Environment(hostname="h", device="cuda", gpu_name=H100, python="3.11", torch="2.13.0",
                              started_at="2026-11-27T10:00:00+00:00")
    trials = [TuneTrial(config=TuneConfig(layout="packed", kernel=kernel, batch_size=size, compile=True),
                        fate="finalist", tokens_per_s=rate, kernel_ran=ran)
              for kernel, size, rate, ran in (("flex", 16, 10.0, "flex-document-mask"),
                                              ("flex", 32, 12.0, "flex-document-mask"),
                                              ("flash", 32, 11.0, "torch-flash-varlen"))]
    finalists = [Finalist(trial=index, tokens_per_s=rate, status="ok") for index, rate in enumerate((10.0, 12.0, 11.0))]
    result = TuneResult.model_validate({"spec": {"kind": "tune", "mode": "inference"}, "environment": environment,
                                        "trials": trials, "finalists": finalists, "winner": 1, "wall_seconds": 60.0})
    figures = figures_of(result, "job 8")
    assert sorted((f.family, f.rate, f.source, f.setting) for f in figures) == [
        ("flex", 12.0, "tune job 8", "tune finalists (packed)"),
        ("torch-flash", 11.0, "tune job 8", "tune finalists (packed)")]


def test_a_sweep_adds_each_family_s_best_kernel_per_length_which_a_model_s_rows_outrank() -> None:
    environment = Environment(hostname="h", device="cuda", gpu_name=H100, python="3.11", torch="2.13.0",
                              started_at="2026-11-27T09:00:00+00:00")
    cells = [AttentionCell(kernel=kernel, seq_len=2048, status=status, tflops=tflops)
             for kernel, status, tflops in (("naive", "ok", 20.0), ("sdpa-math", "ok", 25.0),
                                            ("sdpa-efficient", "ok", 150.0), ("sdpa-flash", "ok", 300.0),
                                            ("flash-attn-fp8", "ok", 900.0), ("flex", "oom", None))]
    result = AttentionResult.model_validate({"spec": {"kind": "attention", "layout": "varlen"},
                                             "environment": environment, "cells": cells})
    figures = figures_of(result, "job 6")
    assert sorted((f.family, f.rate) for f in figures) == [("eager", 20.0), ("sdpa", 150.0), ("torch-flash", 300.0)]
    assert {(f.place, f.band, f.metric, f.source) for f in figures} == {
        (PACKED, 1, "TFLOP/s (attention alone)", "sweep job 6")}
    pick = pick_family(figures, query(), NOW)
    assert pick.family == "torch-flash" and "model attention alone (32 heads × 64)" in pick.reason
    # A model's own rows in the same band come first, even older ones of another model.
    rows = [figure("flex", 2.0, model="m2", at="2026-11-01T00:00:00+00:00"),
            figure("torch-flash", 1.0, model="m2", at="2026-11-01T00:00:00+00:00")]
    assert pick_family([*figures, *rows], query(), NOW).family == "flex"


def test_rows_whose_batch_size_was_probed_compare_each_at_its_own_largest_fit() -> None:
    result = padding_result({"static": [1000.0]}, spec={"device": "cpu", "dtype": "fp32", "attention": "sdpa",
                                                         "batch_size": "auto"})
    probed = [row.model_copy(update={"attention": family, "kernel": family, "batch_size": size, "tokens_per_s": rate,
                                     "probe": ProbeReport(chosen=size, largest_fit=size, smallest_oom=None,
                                                          predicted_limit=None, margin=0.9, cap=size, probes=[],
                                                          seconds=1.0)})
              for row in result.strategies for family, size, rate in (("sdpa", 48, 1000.0), ("flex", 40, 900.0))]
    figures = figures_of(result.model_copy(update={"strategies": probed}), "job 9")
    assert {figure.setting for figure in figures} == {"static · batch auto · compile auto"}
