"""The padding table and CSV rows: measured figures formatted, unmeasured ones never printed as numbers."""

from __future__ import annotations

import csv
import io

from padbench.contract.experts import ExpertLoad, LayerLoad
from padbench.contract.results import Environment, MemoryStats, PartialResult
from padbench.contract.units import format_bytes
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.kinds.padding.report import COLUMNS, comparison_figures, csv_rows, render_table
from padbench.kinds.padding.verdict import summary
from padbench.report import render, render_csv
from padbench.report.cells import WINNER_MARK

GIB = 1 << 30


def sample_result() -> PaddingResult:
    environment = Environment(hostname="gpu-box", device="cuda", gpu_name="NVIDIA H200", python="3.12.3",
                              torch="2.11.0", transformers="5.17.0", flash_attn="2.8.3", cuda="12.8",
                              driver="570.1", dataset_digest="0123456789abcdef", started_at="2026-11-21T10:00:00+00:00")
    common = {"batch_size": 128, "max_logit_error": 0.0061, "logit_tolerance": 0.04, "correctness_passed": True}
    rows = [
        StrategyResult(strategy="static", attention="flash", kernel="torch-flash", status="ok", tokens_per_s=161_000.4,
                       speedup_vs_static=1.0, padding_efficiency=0.151, mfu=0.49,
                       memory=MemoryStats(peak_allocated_bytes=12 * GIB, peak_reserved_bytes=13 * GIB), **common),
        StrategyResult(strategy="binned", n_bins=16, attention="flash", kernel="torch-flash", status="invalid",
                       invalid_reason="measured 3 batches, fewer than min_batches=10", padding_efficiency=0.84,
                       memory=MemoryStats(host_peak_rss_bytes=512 << 20, source="process-peak-rss"), **common),
        StrategyResult(strategy="packed", attention="flash", kernel="torch-flash-varlen", status="ok",
                       tokens_per_s=1_062_000.0, speedup_vs_static=6.596, padding_efficiency=1.0, **common),
        StrategyResult(strategy="packed", attention="eager", kernel="eager-block-mask", batch_size=32,
                       status="failed", error="correctness gate: logits differ", correctness_passed=False),
    ]
    return PaddingResult(spec=PaddingJobSpec(model={"preset": "gpt2-seed"}), environment=environment,
                         model_parameters=183_000_000, flops_per_token=365e6, num_sequences=20_000,
                         real_tokens_total=1_940_000, strategies=rows)


def table_rows(text: str) -> dict[str, str]:
    lines = text.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("strategy"))
    rows = [line.removeprefix(WINNER_MARK) for line in lines[header + 1:header + 5]]
    return {f"{line.split()[0]}:{line.split()[1]}": line for line in rows}


def test_table_shows_measured_figures() -> None:
    text = render_table(sample_result())
    rows = table_rows(text)
    assert all(column in text for column in COLUMNS)
    assert "161,000" in rows["static:torch-flash"] and "12.0 GiB" in rows["static:torch-flash"]
    assert "1,062,000" in rows["packed:torch-flash-varlen"] and "6.60×" in rows["packed:torch-flash-varlen"]
    assert "6.1e-03 (tol 4.0e-02)" in rows["static:torch-flash"] and rows["static:torch-flash"].endswith("yes")
    assert "NVIDIA H200" in text and "gpt2-seed (183.0M parameters)" in text and "flash-attn 2.8.3" in text


def test_invalid_and_failed_rows_print_no_throughput_and_give_the_reason() -> None:
    text = render_table(sample_result())
    rows = table_rows(text)
    invalid, failed = rows["binned[16]:torch-flash"], rows["packed:eager-block-mask"]
    assert "—" in invalid and "no [1]" in invalid and "512.0 MiB RSS" in invalid
    assert "failed [2]" in failed and failed.count("—") >= 5
    assert "[1] measured 3 batches, fewer than min_batches=10" in text
    assert "[2] correctness gate: logits differ" in text


def test_csv_rows_carry_every_figure_in_plain_units() -> None:
    rows = csv_rows(sample_result())
    assert rows[0]["tokens_per_s"] == 161_000.4 and rows[0]["peak_allocated_bytes"] == 12 * GIB
    assert rows[1]["n_bins"] == 16 and rows[1]["tokens_per_s"] is None and rows[1]["reason"].startswith("measured")
    assert rows[3]["peak_allocated_bytes"] is None and rows[3]["status"] == "failed"
    parsed = list(csv.DictReader(io.StringIO(render_csv(sample_result()))))
    assert len(parsed) == 4 and parsed[1]["tokens_per_s"] == "" and parsed[2]["kernel"] == "torch-flash-varlen"


def test_csv_starts_with_the_jobs_identity_so_several_jobs_concatenate() -> None:
    parsed = list(csv.DictReader(io.StringIO(render(sample_result(), "csv", job_id=7))))
    assert list(parsed[0])[:7] == ["job_id", "model", "gpu", "dtype", "mode", "date", "strategy"]
    assert {(row["job_id"], row["model"], row["gpu"], row["dtype"], row["mode"], row["date"]) for row in parsed} == {
        ("7", "gpt2-seed", "NVIDIA H200", "bf16", "inference", "2026-11-21")}


def test_render_dispatches_padding_results() -> None:
    assert render(sample_result(), "table") == render_table(sample_result())


def test_byte_formatting() -> None:
    assert [format_bytes(n) for n in (None, 512, 2048, 3 << 20, 5 * GIB)] == ["—", "512 B", "2.0 KiB", "3.0 MiB",
                                                                                "5.0 GiB"]


def test_a_partial_result_is_marked_above_its_table_and_a_whole_one_is_not() -> None:
    whole = sample_result()
    planned = len(whole.strategies) + 2
    kept = whole.model_copy(update={"partial": PartialResult(rows_finished=len(whole.strategies),
                                                               rows_planned=planned)})
    assert render_table(kept).startswith(f"PARTIAL RESULT: the job was cancelled after {len(whole.strategies)} of "
                                         f"{planned} strategy rows")
    assert "PARTIAL" not in render_table(whole)


def test_a_mixtures_rows_name_their_experts_in_the_table_verdict_compare_and_csv() -> None:
    load = ExpertLoad(experts=64, top_k=8, routed_tokens=1000, padding_share=0.25,
                      layers=[LayerLoad(layer=0, max_tokens=250, mean_tokens=125.0),
                              LayerLoad(layer=1, max_tokens=150, mean_tokens=125.0)])
    rows = [StrategyResult(strategy="binned", n_bins=16, attention="flash", kernel="torch-flash", batch_size=32,
                           status="ok", tokens_per_s=rate, experts=experts, expert_load=load)
            for rate, experts in ((90_000.0, "grouped_mm"), (30_000.0, "eager"))]
    result = sample_result().model_copy(update={
        "spec": PaddingJobSpec(model={"preset": "olmoe-1b-7b"}, experts=["grouped_mm", "eager"]),
        "active_parameters": 1_282_017_280, "model_parameters": 6_919_161_856, "strategies": rows})
    text = render_table(result)
    assert "torch-flash · experts grouped_mm" in text and "torch-flash · experts eager" in text
    assert "1,282.0M of the 6,919.2M parameters active per token (19%" in text
    assert "busiest expert 2.00× the mean (layer 0; 1.60× over the layers), padding tokens routed: 25%" in text
    assert "binned[16] / torch-flash · grouped_mm: 90k tokens/s" in (summary(result) or "")
    assert set(comparison_figures(result)) == {("binned[16]", "torch-flash · grouped_mm"),
                                               ("binned[16]", "torch-flash · eager")}
    assert [(row["experts"], row["expert_padding_share"]) for row in csv_rows(result)] == [
        ("grouped_mm", 0.25), ("eager", 0.25)]
