"""The attention report: one table per metric (rows = lengths, columns = kernels), ratios vs naive, CSV."""

from __future__ import annotations

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.attention.contract import AttentionCell, AttentionJobSpec, AttentionResult
from padbench.kinds.attention.report import METRICS, csv_rows, render_table
from padbench.report import render_csv

ENVIRONMENT = Environment(hostname="box", device="cuda", gpu_name="NVIDIA H200", python="3.12", torch="2.11",
                          started_at="2026-11-01T00:00:00+00:00")


def ok(kernel: str, seq_len: int, ms: float, memory: int) -> AttentionCell:
    return AttentionCell(kernel=kernel, seq_len=seq_len, status="ok", median_ms=ms, p10_ms=ms * 0.9,
                         p90_ms=ms * 1.1, tflops=100 / ms, fraction_of_matmul=0.1 / ms, peak_memory_bytes=memory,
                         rel_error=2e-3, warmup_ms=ms * 3)


def result() -> AttentionResult:
    spec = AttentionJobSpec(kind="attention", seq_lens=[4096, 8192], kernels=["naive", "sdpa-flash", "flash-attn"])
    cells = [
        ok("naive", 4096, 25.0, 16 << 30), ok("sdpa-flash", 4096, 5.0, 256 << 20),
        AttentionCell(kernel="flash-attn", seq_len=4096, status="unsupported", reason="flash_attn is not importable"),
        AttentionCell(kernel="naive", seq_len=8192, status="oom", reason="CUDA out of memory"),
        ok("sdpa-flash", 8192, 14.0, 512 << 20),
        AttentionCell(kernel="flash-attn", seq_len=8192, status="unsupported", reason="flash_attn is not importable"),
    ]
    return AttentionResult(spec=spec, environment=ENVIRONMENT, matmul_tflops=787.0, cells=cells)


def test_one_table_per_metric_with_a_row_per_length() -> None:
    text = render_table(result())
    for title, _ in METRICS:
        assert title in text
    assert "787.0 TFLOP/s" in text and "NVIDIA H200" in text
    time_table = text.split("\n\n")[1].splitlines()
    assert time_table[1].split() == ["N", "naive", "sdpa-flash", "flash-attn"]
    assert time_table[2].split() == ["4096", "25", "±10%", "5", "±10%", "unsupported"]
    assert time_table[3].split()[:2] == ["8192", "oom"]


def test_ratios_against_naive_and_reasons_listed_once() -> None:
    text = render_table(result())
    speedups = text.split("speed-up vs naive")[1].splitlines()
    assert speedups[2].split()[:3] == ["4096", "1.00×", "5.00×"]
    assert speedups[3].split()[:3] == ["8192", "oom", "—"]  # no naive figure: no ratio, never a guess
    assert "64.0×" in text.split("memory reduction vs naive")[1]
    assert text.count("flash_attn is not importable") == 1
    assert "flash-attn N=4096,8192: unsupported" in text


def test_csv_has_one_row_per_cell_with_the_configuration() -> None:
    rows = csv_rows(result())
    assert len(rows) == 6
    flash_4k = next(r for r in rows if r["kernel"] == "sdpa-flash" and r["seq_len"] == 4096)
    assert flash_4k["speedup_vs_naive"] == 5.0 and flash_4k["memory_reduction_vs_naive"] == 64.0
    assert flash_4k["batch"] == 8 and flash_4k["matmul_tflops"] == 787.0
    oom = next(r for r in rows if r["status"] == "oom")
    assert oom["median_ms"] is None and oom["speedup_vs_naive"] is None
    header = render_csv(result(), job_id=9).splitlines()[0]
    assert header.startswith("job_id,model,gpu,dtype,mode,date,batch,heads")
    first = render_csv(result(), job_id=9).splitlines()[1]
    assert first.startswith("9,attention B8 H32 D64,NVIDIA H200,bf16,forward,2026-11-01,")


def test_a_partial_sweep_is_marked_above_its_tables_and_a_whole_one_is_not() -> None:
    whole = result()
    kept = whole.model_copy(update={"cells": whole.cells[:2],
                                    "partial": PartialResult(rows_finished=2, rows_planned=6)})
    assert render_table(kept).startswith("PARTIAL RESULT: the job was cancelled after 2 of 6 cells")
    assert "PARTIAL" not in render_table(whole)
