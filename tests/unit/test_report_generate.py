"""The generate table, its verdict and CSV rows: references marked and never winning, unmeasured figures never
printed as numbers, the context table, and the same verdict served to the dashboard."""

from __future__ import annotations

import csv
import io
import json

from padbench.contract.results import GpuActivity, PartialResult
from padbench.kinds.generate.report import COLUMNS, csv_rows, render_table
from padbench.kinds.generate.verdict import verdict_lines
from padbench.report import render, render_csv
from padbench.report.cells import WINNER_MARK
from padbench.report.compare import compare, render_compare_json
from padbench.report.identity import title
from padbench.report.noise import verdict_out
from padbench.report.terminal import write_table
from tests.generate_result import context_result, generate_result, row, rows_at


def table_lines(text: str) -> dict[str, str]:
    """The table's rows by their first cell (the strategy, `ref: …` for references), star removed."""
    lines = text.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("strategy"))
    body = []
    for line in lines[header + 1:]:
        if not line:
            break
        body.append(line.removeprefix(WINNER_MARK))
    return {line.split("  ")[0]: line for line in body}


def test_the_table_ranks_strategies_then_marked_references_and_stars_the_winner() -> None:
    text = render_table(generate_result())
    assert all(column in text for column in COLUMNS if column != "context") and "context" not in text.split("\n")[5]
    rows = table_lines(text)
    assert list(rows) == ["continuous", "sorted", "static", "ref: transformers-continuous",
                          "ref: transformers-generate"]
    assert next(line for line in text.splitlines() if "continuous" in line).startswith(WINNER_MARK + "continuous")
    assert "2,400" in rows["continuous"] and "2.38k–2.42k" in rows["continuous"] and "2.40×" in rows["continuous"]
    assert "12.5/48 ms" in rows["static"] and "0.0412/1,234 ms" in rows["static"] and "97%" in rows["continuous"]
    assert "3.5/9.75 ms" in rows["static"]  # TPOT, beside TTFT and ITL
    assert "llama-3.2-1b (1235.8M parameters)" in text and "2,900 GB/s" in text and "650 TFLOP/s" in text


def test_figures_that_were_not_measured_print_as_a_dash_and_failures_give_their_reason() -> None:
    failed = row("sorted", None, error="out of memory at batch 16")
    unmeasured = row("static", [990.0, 1000.0, 1010.0], inter_token_latency=None, mfu=None, slot_utilization=None)
    result = generate_result([unmeasured, failed], strategies=["static", "sorted"], references=[])
    rows = table_lines(render_table(result))
    assert "failed [1]" in rows["sorted"] and rows["sorted"].count("—") == 9
    assert "[1] out of memory at batch 16" in render_table(result)
    assert rows["static"].count("—") == 4  # ITL, slot use, MFU and vs static (given as None here)
    assert "nan" not in render_table(result).lower()


def test_the_verdict_states_the_ratio_to_static_and_to_the_fastest_reference() -> None:
    lines = verdict_lines(generate_result())
    assert lines[0] == "verdict: winner continuous / sdpa-kvcache at batch 16: 2.4k output tokens/s"
    assert lines[1].startswith("  margin: 1.60× the runner-up (sorted / sdpa-kvcache at batch 16), 95% interval")
    assert lines[2].startswith("  vs static: 2.40× static (static / sdpa-kvcache at batch 16), 95% interval")
    assert lines[3].startswith("  vs the fastest reference: 1.20× ref: transformers-continuous / transformers-sdpa")
    assert render_table(generate_result()).rstrip().endswith(lines[-1])


def test_a_faster_reference_never_wins_and_rows_the_repeats_cannot_tell_apart_are_within_noise() -> None:
    rows = [row("static", [1000.0, 1010.0, 990.0]), row("sorted", [1005.0, 1015.0, 995.0]),
            row("transformers-continuous", [5000.0, 5010.0, 4990.0], reference=True, kernel="transformers-sdpa")]
    result = generate_result(rows, strategies=["static", "sorted"], references=["transformers-continuous"])
    lines = verdict_lines(result)
    assert lines[0].startswith("verdict: within noise — sorted / sdpa-kvcache") and "static / sdpa-kvcache" in lines[0]
    assert "within noise: the repeats do not tell them apart" in lines[1]
    assert lines[2].startswith("  vs the fastest reference: 0.20× ref: transformers-continuous")


def test_no_valid_strategy_and_contended_rows_are_said() -> None:
    contended = GpuActivity(samples=10, interval_s=0.05, other_processes_max=1, contended_share=0.5,
                            own_process_identified=True, contended=True, contention_allowed=False)
    rows = [row("static", [1000.0, 1010.0, 990.0], gpu_activity=contended),
            row("transformers-generate", None, reference=True, error="no such kernel")]
    lines = verdict_lines(generate_result(rows, strategies=["static"], references=["transformers-generate"]))
    assert lines == ["verdict: none — no strategy row was validly measured",
                     "  1 contended row(s) left out (measurement.allow_contention is false)"]


def test_a_context_table_has_a_column_a_verdict_per_length_and_decode_rates() -> None:
    text = render_table(context_result())
    assert "context" in text and "verdict at context 512: winner continuous" in text
    assert "verdict at context 2,048: winner continuous" in text
    decode = text.split("decode tokens/s by context length:\n", 1)[1].splitlines()
    assert "static / sdpa-kvcache" in decode[0] and "ref: transformers-generate / transformers-sdpa" in decode[0]
    assert decode[1].split()[:2] == ["512", "1,200"] and decode[2].split()[0] == "2,048"


def test_the_server_serves_the_same_verdict_with_rows_by_index() -> None:
    result = context_result()
    served = verdict_out(result)
    assert served.lines == verdict_lines(result) and served.summary is not None
    assert served.winner is not None and result.rows[served.winner].strategy == "continuous"
    assert result.rows[served.winner].context == 512
    assert [result.rows[index].strategy for index in served.ranked[:5]] == [
        "continuous", "sorted", "static", "transformers-continuous", "transformers-generate"]
    noisy = generate_result([row("static", [500.0, 1500.0, 1000.0])], strategies=["static"], references=[])
    assert verdict_out(noisy).doubtful == [0]


def test_csv_rows_hold_every_figure_in_plain_units_and_none_as_empty() -> None:
    result = generate_result([*rows_at(), row("sorted", None, context=None, error="boom")])
    parsed = list(csv.DictReader(io.StringIO(render_csv(result, job_id=9))))
    assert len(parsed) == len(csv_rows(result)) == 6
    first = parsed[0]
    assert first["job_id"] == "9" and first["model"] == "llama-3.2-1b" and first["mode"] == "generate"
    assert float(first["output_tokens_per_s"]) == 1000.0 and first["ttft_p99_ms"] == "48.0"
    assert parsed[3]["reference"] == "True"
    assert parsed[-1]["output_tokens_per_s"] == "" and parsed[-1]["reason"] == "boom"


def test_results_compare_title_and_partial_go_through_the_registry() -> None:
    result = generate_result()
    assert title(result, 3) == "job 3 · llama-3.2-1b · NVIDIA H100 · bf16 · generate · 2026-11-26"
    assert json.loads(render(result, "json"))["kind"] == "generate"
    compared = json.loads(render_compare_json(compare([(1, result), (2, context_result())])))
    assert compared["metric"] == "output_tokens_per_s"
    assert {"strategy": "ref: transformers-generate", "kernel": "transformers-sdpa", "batch_sizes": ["16", None],
            "values": [900.0, None], "ratios_vs_first": [1.0, None]} in compared["rows"]
    partial = generate_result(rows_at()[:2]).model_copy(
        update={"partial": PartialResult(rows_finished=2, rows_planned=5)})
    assert render_table(partial).startswith("PARTIAL RESULT: the job was cancelled after 2 of 5 rows")
    stream = io.StringIO()
    write_table(result, stream)
    assert stream.getvalue() == render_table(result)
