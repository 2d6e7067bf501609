"""The verdict under the padding table, the spread columns, noisy/contended marking and batch-size curves."""

from __future__ import annotations

from typing import Any

from padbench.contract.api import VerdictOut
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import Environment, GpuActivity, ProbeAttempt, ProbeReport
from padbench.contract.student_t import t_quantile_975
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.kinds.padding.report import csv_rows, render_table, table_rows
from padbench.kinds.padding.verdict import curve_lines, verdict_lines
from padbench.report.cells import WINNER_MARK
from padbench.report.noise import verdict_out
from padbench.worker.engine.measure.spread import repeat_spread
from tests.unit.test_report_attention import result as attention_result

ENVIRONMENT = Environment(hostname="box", device="cuda", gpu_name="NVIDIA H100", python="3.12", torch="2.13.0",
                          started_at="2026-11-23T04:00:00+00:00")


def row(strategy: str, repeats: list[float], batch_size: int = 64, **fields: Any) -> StrategyResult:
    rate = sum(repeats) / len(repeats)
    return StrategyResult(strategy=strategy, n_bins=4 if strategy == "binned" else None, attention="flash",
                          kernel="torch-flash", batch_size=batch_size, status="ok", tokens_per_s=rate,
                          repeat_tokens_per_s=repeats, spread=repeat_spread(repeats, 0.05), **fields)


def result(*rows: StrategyResult) -> PaddingResult:
    return PaddingResult(spec=PaddingJobSpec(), environment=ENVIRONMENT, model_parameters=1_000_000,
                         flops_per_token=2e6, num_sequences=100, real_tokens_total=10_000, strategies=list(rows))


def test_spread_uses_students_t_for_the_interval() -> None:
    spread = repeat_spread([100.0, 110.0, 120.0], 0.05)
    assert spread is not None
    # mean 110, s = 10, t(0.975, 2) = 4.303: half-width 4.303 · 10 / √3 = 24.84
    assert abs(spread.ci95_low_tokens_per_s - 85.16) < 0.01 and abs(spread.ci95_high_tokens_per_s - 134.84) < 0.01
    assert spread.min_tokens_per_s == 100 and spread.max_tokens_per_s == 120
    assert abs(spread.cv - 10 / 110) < 1e-9 and spread.noisy
    assert repeat_spread([100.0], 0.05) is None
    assert t_quantile_975(1) == 12.706 and t_quantile_975(200) == 1.96


def test_verdict_names_the_winner_its_speedup_interval_and_batch_size() -> None:
    static = row("static", [100.0, 101.0, 99.0])
    packed = row("packed", [500.0, 505.0, 495.0], batch_size=128)
    lines = verdict_lines(result(static, packed))
    assert lines[0] == "verdict: winner packed / torch-flash at batch 128: 500 tokens/s"
    assert "5.00× static (static / torch-flash at batch 64), 95% interval" in lines[1]
    low, high = (float(x) for x in lines[1].rsplit("interval ", 1)[1].rstrip("×").split("–"))
    assert low < 5.0 < high
    text = render_table(result(static, packed))
    table = text.splitlines()
    first_row = next(i for i, line in enumerate(table) if line.startswith("strategy")) + 1
    assert table[first_row].startswith(WINNER_MARK + "packed")  # sorted fastest first, and starred


def test_identical_rows_are_within_noise() -> None:
    lines = verdict_lines(result(row("static", [100.0, 102.0, 98.0]), row("dynamic", [100.0, 102.0, 98.0])))
    assert lines[0].startswith("verdict: within noise") and "Welch's t-test" in lines[0]


def test_rows_whose_intervals_overlap_still_differ_when_welchs_test_says_so() -> None:
    """Repeats of two kernels on one H100 (binned Gemma 2 training, 5 each): each row's 95% interval overlaps the
    other's, yet the difference of the means is significant at 5%, and the verdict names the winner."""
    flex = row("binned", [10551.0, 10282.0, 11035.0, 10879.0, 10555.0])
    eager = row("static", [10414.0, 10243.0, 10055.0, 10273.0, 9706.0])
    assert flex.spread is not None and eager.spread is not None
    assert flex.spread.ci95_low_tokens_per_s < eager.spread.ci95_high_tokens_per_s
    lines = verdict_lines(result(eager, flex))
    assert lines[0].startswith("verdict: winner binned[4]")
    assert lines[1].startswith("  speed-up: 1.05× static") and lines[1].endswith("95% interval 1.01–1.09×")


def test_a_winner_states_its_margin_over_the_runner_up() -> None:
    """Two kernels of one layout (six repeats each on an H100): how much faster the winner is, with the interval."""
    flex = row("binned", [10840.0, 10020.0, 11050.0, 10410.0, 9990.0, 10200.0])
    eager = row("dynamic", [9030.0, 9760.0, 9420.0, 10150.0, 9500.0, 9800.0])
    lines = verdict_lines(result(flex, eager))
    assert lines[0].startswith("verdict: winner binned[4]")
    assert lines[1].startswith("  margin: 1.08× the runner-up (dynamic / torch-flash at batch 64), 95% interval 1.0")


def test_noisy_row_shows_its_figure_and_cv_instead_of_valid() -> None:
    noisy = row("binned", [100.0, 150.0, 60.0])
    cells, _notes = table_rows(result(row("static", [50.0, 50.5, 49.5]), noisy))
    binned = next(cells_ for cells_ in cells if "binned[4]" in cells_[0])
    assert binned[3] == "103" and binned[-1].startswith("noisy CV ") and binned[6].endswith("%")
    assert csv_rows(result(noisy))[0]["noisy"] is True


def test_contended_rows_are_marked_and_left_out_of_the_verdict() -> None:
    activity = GpuActivity(samples=40, interval_s=0.05, other_processes_max=1, contended_share=0.75,
                           own_process_identified=True, contended=True, contention_allowed=False,
                           throttled=True, throttled_share=0.5, throttle_reasons=["sw_power_cap"],
                           sm_clock_min_mhz=1400, sm_clock_max_mhz=1980)
    fast_but_contended = row("packed", [900.0, 901.0, 899.0], gpu_activity=activity)
    text = render_table(result(row("static", [100.0, 101.0, 99.0]), fast_but_contended))
    assert "contended [1]" in text and "power cap [2]" in text and "held its power limit" in text
    hot = activity.model_copy(update={"contended": False, "throttle_reasons": ["sw_power_cap", "hw_thermal"]})
    assert "throttled [1]" in render_table(result(row("packed", [900.0, 901.0, 899.0], gpu_activity=hot)))
    assert "1 other process(es) computed on the GPU in 75% of 40 samples" in text
    assert "sw_power_cap" in text and "1400–1980 MHz" in text
    assert "verdict: winner static" in text and "1 contended row(s) left out" in text
    allowed = fast_but_contended.model_copy(update={"gpu_activity": activity.model_copy(
        update={"contention_allowed": True})})
    assert verdict_lines(result(row("static", [100.0, 101.0, 99.0]), allowed))[0].startswith("verdict: winner packed")


def test_batch_size_curve_shows_where_throughput_stops_growing() -> None:
    probe = ProbeReport(chosen=380, largest_fit=400, smallest_oom=410, predicted_limit=405, margin=0.05, cap=4096,
                        probes=[ProbeAttempt(size=400, outcome="fits", seconds=2.0)], seconds=6.0)
    rows = [row("packed", [100.0, 101.0, 99.0], batch_size=16), row("packed", [300.0, 303.0, 297.0], batch_size=64),
            row("packed", [400.0, 410.0, 390.0], batch_size=256),
            row("packed", [405.0, 415.0, 395.0], batch_size=380, probe=probe)]
    lines = curve_lines(result(*rows))
    assert lines[0] == "packed / flash: 16 → 100 · 64 → 300 · 256 → 400 · 380 (auto) → 405"
    assert lines[1] == "  stops growing at batch 256: larger sizes gain less than 2% or are within noise of it"
    text = render_table(result(*rows))
    assert "fit 400, OOM 410 → 380" in text and "batch-size curves" in text


def test_a_gain_too_small_to_matter_ends_the_curve_even_when_the_intervals_are_tight() -> None:
    # An H100's static curve: 0.6% from 256 to the probed 1317, with intervals of ±0.05%.
    rows = [row("static", [185_800.0, 185_850.0, 185_900.0], batch_size=64),
            row("static", [190_850.0, 190_886.0, 190_920.0], batch_size=256),
            row("static", [191_950.0, 191_978.0, 192_000.0], batch_size=1317)]
    assert curve_lines(result(*rows))[1].startswith("  stops growing at batch 256:")
    rows[1] = row("static", [186_900.0, 186_950.0, 187_000.0], batch_size=256)  # 2.6% below: still growing
    assert curve_lines(result(*rows))[1] == "  still growing at the largest size measured (1317)"


def test_results_stored_before_spreads_still_parse() -> None:
    stored = result(row("static", [100.0])).model_dump(mode="json")
    for strategy in stored["strategies"]:
        del strategy["spread"], strategy["gpu_activity"]
    del stored["environment"]["clocks_at_start"], stored["environment"]["clocks_at_end"]
    stored["spec"]["measurement"] = {"repeats": 1}
    parsed = JOB_RESULT_ADAPTER.validate_python(stored)
    assert isinstance(parsed, PaddingResult) and parsed.strategies[0].spread is None
    assert "one repeat per row: no interval" in render_table(parsed)


def test_the_served_verdict_is_the_printed_one_with_the_rows_it_highlights_and_dims() -> None:
    static, packed = row("static", [100.0, 101.0, 99.0]), row("packed", [500.0, 505.0, 495.0], batch_size=128)
    noisy = row("dynamic", [100.0, 300.0, 50.0])
    checked = result(static, packed, noisy)
    served = verdict_out(checked)
    assert served.lines == verdict_lines(checked)
    assert served.winner == 1 and served.ranked == [1, 2, 0] and served.doubtful == [2]
    assert served.summary == "packed / torch-flash: 500 tokens/s"


def test_an_all_noisy_job_is_within_noise_in_every_view() -> None:
    static, dynamic = row("static", [600.0, 1000.0, 1400.0]), row("dynamic", [900.0, 1600.0, 2270.0])
    noisy = result(static, dynamic)
    served = verdict_out(noisy)
    assert served.lines[0].startswith("verdict: within noise — dynamic / torch-flash at batch 64 (1.59k tokens/s)")
    assert "the winner's repeats are noisy" in served.lines[-1]
    assert served.summary == "within noise: dynamic / torch-flash, static / torch-flash"
    assert served.doubtful == [0, 1] and served.winner == 1


def test_without_a_valid_row_there_is_no_winner_and_an_attention_sweep_no_verdict() -> None:
    failed = StrategyResult(strategy="static", attention="flash", kernel="torch-flash", batch_size=8, status="failed",
                            error="CUDA out of memory")
    served = verdict_out(result(failed))
    assert served.lines == ["verdict: none — no row was validly measured"]
    assert served.winner is None and served.summary is None and served.doubtful == [0]
    assert verdict_out(attention_result()) == VerdictOut()


def test_wrapped_rows_are_marked_and_never_win() -> None:
    static = row("static", [100.0, 101.0, 99.0])
    packed = row("packed", [500.0, 505.0, 495.0], batch_size=128)
    wrapped = row("wrapped", [700.0, 705.0, 695.0], crosses_documents=True)
    done = result(static, packed, wrapped)
    lines = verdict_lines(done)
    assert lines[0] == "verdict: winner packed / torch-flash at batch 128: 500 tokens/s"
    assert lines[-1].startswith("  not ranked: wrapped / torch-flash at batch 64 (700 tokens/s, 7.00× static)")
    cells, notes = table_rows(done)
    assert cells[0][0] == "wrapped [1]" and cells[1][0] == WINNER_MARK + "packed"
    assert notes[0].startswith("wrapped: rows of max_length tokens") and "not the function" in notes[0]
    assert csv_rows(done)[2]["crosses_documents"] is True
    assert verdict_lines(result(wrapped))[1].startswith("  not ranked: wrapped")
