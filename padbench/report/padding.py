"""Padding results for people (a table) and tools (CSV rows).

A figure that was not measured prints as "—", never as a number; an invalid or failed row says why in a
numbered note under the table, so the columns stay readable. Rows are ranked fastest first with the
winner starred, and the table ends with the verdict in words and any batch-size curves
(`padbench.report.verdict`). `table_rows` gives the cells and notes alone, for other renderers.
"""

from __future__ import annotations

from typing import Any, Protocol

from padbench.contract.padding import PaddingResult, StrategyResult
from padbench.contract.results import Environment, GpuActivity, MemoryStats, ProbeReport, Spread
from padbench.report.auto_sizes import batch_cell, tier_lines, tiers_field
from padbench.report.columns import align
from padbench.report.compilation import compile_fields, compile_lines, compiled_rows
from padbench.report.experts import active_line, compare_kernel, kernel_cell, load_fields, load_lines
from padbench.report.kind import CompareKey, CompareRule, RunFacts
from padbench.report.partial import partial_lines
from padbench.report.ranks import parallel_lines, rank_fields, rank_lines
from padbench.report.training import step_split_fields, step_split_lines, training_lines
from padbench.report.verdict import Vetted, compact_rate, curve_lines, ranked_rows, verdict_lines, winner

MISSING = "—"
WINNER_MARK = "★ "
# MFU against the datasheet peak, and against the GEMM rate measured in the same job ("MFU (GEMM)").
COLUMNS = ("strategy", "kernel", "batch", "tokens/s", "95% interval", "min–max", "CV", "vs static",
           "padding eff.", "MFU", "MFU (GEMM)", "peak memory", "max logit error", "probe", "valid")
RIGHT_ALIGNED = frozenset({"batch", "tokens/s", "95% interval", "min–max", "CV", "vs static", "padding eff.",
                           "MFU", "MFU (GEMM)", "peak memory"})


def format_bytes(count: int | None) -> str:
    if count is None:
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def format_memory(memory: MemoryStats | None) -> str:
    """Device runs show the allocator's peak; CPU runs the process's peak resident set, labelled as such."""
    if memory is None:
        return MISSING
    if memory.peak_allocated_bytes is not None:
        return format_bytes(memory.peak_allocated_bytes)
    if memory.host_peak_rss_bytes is not None:
        return f"{format_bytes(memory.host_peak_rss_bytes)} RSS"
    return MISSING


def _number(value: float | None, pattern: str) -> str:
    return MISSING if value is None else format(value, pattern)


def _logit_error(row: StrategyResult) -> str:
    if row.max_logit_error is None:
        return MISSING
    tolerance = f" (tol {row.logit_tolerance:.1e})" if row.logit_tolerance is not None else ""
    return f"{row.max_logit_error:.1e}{tolerance}"


class Judged(Vetted, Protocol):
    """A row of any kind as its validity cell reads it: the verdict's view of it and why it was not measured."""

    @property
    def invalid_reason(self) -> str | None: ...

    @property
    def error(self) -> str | None: ...


def _note(notes: list[str], text: str) -> str:
    notes.append(text)
    return f"[{len(notes)}]"


def _activity_notes(activity: GpuActivity | None, notes: list[str]) -> list[str]:
    """`contended` and `throttled` markers, each with a note holding the sampled figures."""
    if activity is None:
        return []
    markers = []
    if activity.contended:
        allowed = " (allowed by measurement.allow_contention)" if activity.contention_allowed else \
            " — left out of the verdict"
        marker = _note(notes, f"contended: up to {activity.other_processes_max} other process(es) computed on "
                              f"the GPU in {activity.contended_share:.0%} of {activity.samples} samples{allowed}")
        markers.append(f"contended {marker}")
    if activity.throttled:
        clocks = (f"; SM clock {activity.sm_clock_min_mhz}–{activity.sm_clock_max_mhz} MHz"
                  if activity.sm_clock_min_mhz is not None else "")
        reasons = ", ".join(activity.throttle_reasons) or "unspecified"
        text = f"throttled ({reasons}) in {activity.throttled_share:.0%} of samples{clocks}"
        # Held at the power limit is how a GPU runs at full load, unlike heat or a hardware slowdown: its
        # rows stay comparable with each other, so the mark says which it is rather than raising an alarm.
        at_power_cap = activity.throttle_reasons == ["sw_power_cap"]
        if at_power_cap:
            text += " — the GPU held its power limit, as it does at full load; rows under the same cap compare"
        markers.append(f"{'power cap' if at_power_cap else 'throttled'} {_note(notes, text)}")
    return markers


def validity(row: Judged, notes: list[str]) -> str:
    """`yes`, or why not (`no [1]`, `failed [2]`, `noisy CV 7.1%`, `contended [3]`), with the reasons in `notes`."""
    if row.status != "ok":
        marker = _note(notes, row.invalid_reason or row.error or "no reason recorded")
        return f"{'no' if row.status == 'invalid' else 'failed'} {marker}"
    markers = []
    if row.spread is not None and row.spread.noisy:
        markers.append(f"noisy CV {row.spread.cv:.1%}")
    markers += _activity_notes(row.gpu_activity, notes)
    return ", ".join(markers) or "yes"


def _spread_cells(row: StrategyResult) -> tuple[str, str, str]:
    spread = row.spread
    if spread is None or row.tokens_per_s is None:
        return MISSING, MISSING, MISSING
    return (f"{compact_rate(spread.ci95_low_tokens_per_s)}–{compact_rate(spread.ci95_high_tokens_per_s)}",
            f"{compact_rate(spread.min_tokens_per_s)}–{compact_rate(spread.max_tokens_per_s)}",
            f"{spread.cv:.1%}")


def probe_cell(probe: ProbeReport | None) -> str:
    """The OOM probe's bracket: the largest size that fitted, the smallest that ran out, and the size chosen."""
    if probe is None:
        return MISSING
    oom = f"OOM {probe.smallest_oom}" if probe.smallest_oom is not None else f"no OOM ≤ {probe.largest_fit}"
    mode = f" ({probe.mode})" if probe.mode != "predict" else ""
    return f"fit {probe.largest_fit}, {oom} → {probe.chosen}{mode}{' (cached)' if probe.cached else ''}"


CROSSES_DOCUMENTS_NOTE = (
    "{label}: rows of max_length tokens cut from all sequences run end to end, attention never reset at a "
    "document's boundary, so a token sees the documents before it in its row: not the function the other "
    "layouts compute. Its gate compared each row with that row run alone; tokens/s counts real tokens; it takes "
    "no part in the verdict")


def _strategy_cell(row: StrategyResult, notes: list[str], is_winner: bool) -> str:
    marker = f" {_note(notes, CROSSES_DOCUMENTS_NOTE.format(label=row.label))}" if row.crosses_documents else ""
    return f"{WINNER_MARK if is_winner else ''}{row.label}{marker}"


def _cells(row: StrategyResult, notes: list[str], is_winner: bool = False) -> tuple[str, ...]:
    batch = batch_cell(row)
    return (_strategy_cell(row, notes, is_winner), kernel_cell(row), batch, _number(row.tokens_per_s, ",.0f"),
            *_spread_cells(row),
            _number(row.speedup_vs_static, ".2f") + ("×" if row.speedup_vs_static is not None else ""),
            _number(row.padding_efficiency, ".2f"), _number(row.mfu, ".2f"), _number(row.mfu_vs_matmul, ".2f"),
            format_memory(row.memory), _logit_error(row), probe_cell(row.probe),
            validity(row, notes))


def table_rows(result: PaddingResult) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's cells (one tuple per row, in COLUMNS order, fastest first) and its numbered notes."""
    notes: list[str] = []
    best = winner(result)
    return [_cells(row, notes, row is best) for row in ranked_rows(result.strategies)], notes


def _header(result: PaddingResult) -> list[str]:
    spec, env = result.spec, result.environment
    model = spec.model.label
    device = env.gpu_name or env.device
    return [
        f"padding benchmark · {model} ({result.model_parameters / 1e6:.1f}M parameters) · {spec.dtype} · "
        f"{spec.mode}{' · compiled' if compiled_rows(result) else ''} · {device} on {env.hostname} · {env.started_at}",
        f"{result.num_sequences:,} sequences, {result.real_tokens_total:,} real tokens, max_length "
        f"{spec.data.max_length}, from {spec.data.source} (digest {(env.dataset_digest or MISSING)[:12]})",
        *([spec.trl.mapping()] if spec.trl is not None else []),
        *active_line(result),
        library_line(env),
        f"MFU denominators: datasheet peak {tflops(env.peak_tflops)}, GEMM rate measured in this job "
        f"{tflops(result.matmul_tflops)}",
    ]


def library_line(env: Environment) -> str:
    """`torch 2.11.0 · transformers 5.17.0 · CUDA 13.0 · driver 580.159.04`: the versions that were present."""
    return " · ".join([f"torch {env.torch}"] + [f"{name} {version}" for name, version in (
        ("transformers", env.transformers), ("flash-attn", env.flash_attn),
        ("flash-attn-cute", env.flash_attn_cute), ("CUDA", env.cuda), ("driver", env.driver)) if version])


def tflops(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.0f} TFLOP/s" if value >= 10 else f"{value:.2f} TFLOP/s"


def clock_line(env: Environment) -> list[str]:
    start, end = env.clocks_at_start, env.clocks_at_end
    if start is None or end is None:
        return []
    return [f"GPU clocks: SM {start.sm_mhz or MISSING} MHz at the start, {end.sm_mhz or MISSING} MHz at the end; "
            f"{start.temperature_c if start.temperature_c is not None else MISSING} → "
            f"{end.temperature_c if end.temperature_c is not None else MISSING} °C"]


def header_lines(result: PaddingResult) -> list[str]:
    return [*partial_lines(result.partial, "strategy rows"), *_header(result), *parallel_lines(result),
            *training_lines(result), *clock_line(result.environment)]


def table_text(header: list[str], table: list[str], notes: list[str], verdict: list[str], after: list[str]) -> str:
    """A kind's results as text: its header lines, the aligned table, the numbered notes, the verdict, the rest."""
    lines = [*header, "", *table]
    if notes:
        lines += ["", *(f"[{number}] {note}" for number, note in enumerate(notes, start=1))]
    lines += ["", *verdict]
    if after:
        lines += ["", *after]
    return "\n".join(lines) + "\n"


def render_table(result: PaddingResult) -> str:
    rows, notes = table_rows(result)
    curve = curve_lines(result)
    after = ["batch-size curves (tokens/s):", *(f"  {line}" for line in curve)] if curve else []
    after += (tier_lines(result) + step_split_lines(result) + load_lines(result) + compile_lines(result)
              + rank_lines(result))
    return table_text(header_lines(result), align([COLUMNS, *rows], RIGHT_ALIGNED), notes, verdict_lines(result),
                      after)


def csv_rows(result: PaddingResult) -> list[dict[str, Any]]:
    """One row per strategy, every measured figure in plain units (bytes, seconds, tokens/s)."""
    rows = []
    for row in result.strategies:
        rows.append({
            "strategy": row.strategy, "n_bins": row.n_bins, "pad_to_multiple_of": row.pad_to_multiple_of,
            "crosses_documents": row.crosses_documents, "attention": row.attention, "kernel": row.kernel,
            "batch_size": row.batch_size, "auto_times": row.auto_times, "batch_tiers": tiers_field(row),
            "status": row.status, "reason": row.invalid_reason or row.error,
            "tokens_per_s": row.tokens_per_s, "speedup_vs_static": row.speedup_vs_static,
            **spread_fields(row.spread), **activity_fields(row.gpu_activity),
            "median_batch_tokens_per_s": row.median_batch_tokens_per_s,
            "p90_batch_tokens_per_s": row.p90_batch_tokens_per_s, "padding_efficiency": row.padding_efficiency,
            "mfu": row.mfu, "mfu_vs_matmul": row.mfu_vs_matmul, "gqa": row.gqa, "real_tokens": row.real_tokens,
            "computed_tokens": row.computed_tokens,
            "batches": row.batches, "measured_seconds": row.measured_seconds, "warmup_seconds": row.warmup_seconds,
            **memory_fields(row.memory), "max_logit_error": row.max_logit_error, "logit_tolerance": row.logit_tolerance,
            "correctness_passed": row.correctness_passed, **rank_fields(row), **step_split_fields(row),
            **compile_fields(row),
            **load_fields(row),
        })
    return rows


def spread_fields(spread: Spread | None) -> dict[str, Any]:
    return {"repeats": spread.repeats if spread else None,
            "ci95_low_tokens_per_s": spread.ci95_low_tokens_per_s if spread else None,
            "ci95_high_tokens_per_s": spread.ci95_high_tokens_per_s if spread else None,
            "min_repeat_tokens_per_s": spread.min_tokens_per_s if spread else None,
            "max_repeat_tokens_per_s": spread.max_tokens_per_s if spread else None,
            "cv": spread.cv if spread else None, "noisy": spread.noisy if spread else None}


def memory_fields(memory: MemoryStats | None) -> dict[str, Any]:
    memory = memory or MemoryStats()
    return {"peak_allocated_bytes": memory.peak_allocated_bytes, "peak_reserved_bytes": memory.peak_reserved_bytes,
            "device_used_bytes": memory.device_used_bytes, "host_peak_rss_bytes": memory.host_peak_rss_bytes}


def activity_fields(activity: GpuActivity | None) -> dict[str, Any]:
    return {"contended": activity.contended if activity else None,
            "contended_share": activity.contended_share if activity else None,
            "throttled": activity.throttled if activity else None}


def run_facts(result: PaddingResult) -> RunFacts:
    return RunFacts(model=result.spec.model.label, dtype=result.spec.dtype, mode=result.spec.mode)


def comparison_figures(result: PaddingResult) -> dict[CompareKey, float | None]:
    """Keyed by strategy and kernel (with the experts' implementation of a mixture of experts); a layout measured
    at several batch sizes has a row per size."""
    pairs = [(row.label, compare_kernel(row)) for row in result.strategies]
    figures: dict[CompareKey, float | None] = {}
    for row, pair in zip(result.strategies, pairs, strict=True):
        strategy = f"{row.label} @ {row.batch_size}" if pairs.count(pair) > 1 else row.label
        figures[(strategy, pair[1])] = row.tokens_per_s if row.status == "ok" else None
    return figures


COMPARE = CompareRule[PaddingResult](
    figures=comparison_figures, key_names=("strategy", "kernel"), metric="tokens_per_s", metric_label="tokens/s",
    show=lambda value: f"{value:,.0f}", higher_is_faster=True)
