"""Padding results for people (a table) and tools (CSV rows).

A figure that was not measured prints as "—", never as a number; an invalid or failed row says why in a
numbered note under the table, so the columns stay readable. Rows are ranked fastest first with the
winner starred, and the table ends with the verdict in words and any batch-size curves
(`padbench.kinds.padding.verdict`). `table_rows` gives the cells and notes alone, for other renderers.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.table import ResultTable, RowMark, TableColumn, TableRow
from padbench.kinds.padding.auto_sizes import batch_cell, tier_lines, tiers_field
from padbench.kinds.padding.compilation import compile_fields, compile_lines, compiled_rows
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import active_line, compare_kernel, kernel_cell, load_fields, load_lines
from padbench.kinds.padding.ranks import parallel_lines, rank_fields, rank_lines
from padbench.kinds.padding.scaling import (
    SCALING_COLUMNS,
    is_scaling,
    scaling_cells,
    scaling_fields,
    scaling_lines,
)
from padbench.kinds.padding.training import step_split_fields, step_split_lines, training_lines
from padbench.kinds.padding.verdict import compact_rate, curve_lines, ranked_rows, verdict_lines, winner
from padbench.report.attention_auto import attention_auto_lines
from padbench.report.cells import (
    MISSING,
    WINNER_MARK,
    activity_fields,
    clock_line,
    format_memory,
    library_line,
    memory_fields,
    note,
    number,
    probe_cell,
    spread_fields,
    tflops,
    validity,
)
from padbench.report.efficiency import cost_lines, energy_lines
from padbench.report.kind import CompareKey, CompareRule, RunFacts
from padbench.report.noise import is_doubtful
from padbench.report.partial import partial_lines
from padbench.report.table import plain_text

# MFU against the datasheet peak, and against the GEMM rate measured in the same job ("MFU (GEMM)").
COLUMNS = ("strategy", "kernel", "batch", "tokens/s", "95% interval", "min–max", "CV", "vs static",
           "padding eff.", "MFU", "MFU (GEMM)", "peak memory", "max logit error", "probe", "valid")
# Figures read on demand: a column on a terminal, the row's details on the dashboard.
DETAIL_COLUMNS = frozenset({"min–max", "CV", "MFU (GEMM)", "max logit error", "probe"})
RIGHT_ALIGNED = frozenset({*SCALING_COLUMNS, "batch", "tokens/s", "95% interval", "min–max", "CV", "vs static",
                           "padding eff.", "MFU", "MFU (GEMM)", "peak memory"})


def _logit_error(row: StrategyResult) -> str:
    if row.max_logit_error is None:
        return MISSING
    tolerance = f" (tol {row.logit_tolerance:.1e})" if row.logit_tolerance is not None else ""
    return f"{row.max_logit_error:.1e}{tolerance}"


def _spread_cells(row: StrategyResult) -> tuple[str, str, str]:
    spread = row.spread
    if spread is None or row.tokens_per_s is None:
        return MISSING, MISSING, MISSING
    return (f"{compact_rate(spread.ci95_low_tokens_per_s)}–{compact_rate(spread.ci95_high_tokens_per_s)}",
            f"{compact_rate(spread.min_tokens_per_s)}–{compact_rate(spread.max_tokens_per_s)}",
            f"{spread.cv:.1%}")


CROSSES_DOCUMENTS_NOTE = (
    "{label}: rows of max_length tokens cut from all sequences run end to end, attention never reset at a "
    "document's boundary, so a token sees the documents before it in its row: not the function the other "
    "layouts compute. Its gate compared each row with that row run alone; tokens/s counts real tokens; it takes "
    "no part in the verdict")


def _strategy_cell(row: StrategyResult, notes: list[str], is_winner: bool) -> str:
    marker = f" {note(notes, CROSSES_DOCUMENTS_NOTE.format(label=row.label))}" if row.crosses_documents else ""
    return f"{WINNER_MARK if is_winner else ''}{row.label}{marker}"


def _cells(row: StrategyResult, notes: list[str], is_winner: bool = False) -> tuple[str, ...]:
    batch = batch_cell(row)
    return (_strategy_cell(row, notes, is_winner), kernel_cell(row), batch, number(row.tokens_per_s, ",.0f"),
            *_spread_cells(row),
            number(row.speedup_vs_static, ".2f") + ("×" if row.speedup_vs_static is not None else ""),
            number(row.padding_efficiency, ".2f"), number(row.mfu, ".2f"), number(row.mfu_vs_matmul, ".2f"),
            format_memory(row.memory), _logit_error(row), probe_cell(row.probe),
            validity(row, notes))


def columns(result: PaddingResult) -> tuple[str, ...]:
    """COLUMNS, with a scaling axis's GPU count, tokens/s per GPU and efficiency after the batch size."""
    return (*COLUMNS[:3], *SCALING_COLUMNS, *COLUMNS[3:]) if is_scaling(result) else COLUMNS


def table_rows(result: PaddingResult) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's cells (one tuple per row, in `columns` order, fastest first) and its numbered notes."""
    notes: list[str] = []
    best = winner(result)
    scaling = is_scaling(result)
    rows = [_cells(row, notes, row is best) for row in ranked_rows(result.strategies)]
    if scaling:
        rows = [(*cells[:3], *scaling_cells(row), *cells[3:])
                for cells, row in zip(rows, ranked_rows(result.strategies), strict=True)]
    return rows, notes


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


def header_lines(result: PaddingResult) -> list[str]:
    return [*partial_lines(result.partial, "strategy rows"), *_header(result), *parallel_lines(result),
            *training_lines(result), *attention_auto_lines(result.attention_auto), *clock_line(result.environment)]


def result_table(result: PaddingResult) -> ResultTable:
    """The table every view renders: fastest first, the verdict's winner and the rows not to rank by marked."""
    rows, notes = table_rows(result)
    best = winner(result)
    index = {id(row): position for position, row in enumerate(result.strategies)}
    marks: list[RowMark] = ["winner" if row is best else "doubtful" if is_doubtful(row) else None
                            for row in ranked_rows(result.strategies)]
    curve = curve_lines(result)
    after = ["batch-size curves (tokens/s):", *(f"  {line}" for line in curve)] if curve else []
    after += (scaling_lines(result) + tier_lines(result) + step_split_lines(result) + load_lines(result)
              + compile_lines(result) + rank_lines(result) + cost_lines(result) + energy_lines(
                  [(f"{row.label} / {row.kernel}", row.energy) for row in result.strategies], "real"))
    return ResultTable(
        header=header_lines(result),
        columns=[TableColumn(name=name, right=name in RIGHT_ALIGNED, detail=name in DETAIL_COLUMNS)
                 for name in columns(result)],
        rows=[TableRow(cells=list(cells), row=index[id(row)], mark=mark)
              for cells, row, mark in zip(rows, ranked_rows(result.strategies), marks, strict=True)],
        notes=notes, verdict=verdict_lines(result), after=after)


def render_table(result: PaddingResult) -> str:
    return plain_text(result_table(result))


def csv_rows(result: PaddingResult) -> list[dict[str, Any]]:
    """One row per strategy, every measured figure in plain units (bytes, seconds, tokens/s)."""
    rows = []
    scaling = is_scaling(result)
    for row in result.strategies:
        rows.append({
            **(scaling_fields(row) if scaling else {}),
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


def run_facts(result: PaddingResult) -> RunFacts:
    return RunFacts(model=result.spec.model.label, dtype=result.spec.dtype, mode=result.spec.mode)


def comparison_keys(result: PaddingResult) -> list[tuple[CompareKey, StrategyResult]]:
    """Each row by its compare key: strategy and kernel (with the experts' implementation of a mixture of experts);
    a layout measured at several batch sizes has a row per size."""
    pairs = [(row.label, compare_kernel(row)) for row in result.strategies]
    return [((f"{pair[0]} @ {row.batch_size}" if pairs.count(pair) > 1 else pair[0], pair[1]), row)
            for row, pair in zip(result.strategies, pairs, strict=True)]


def comparison_figures(result: PaddingResult) -> dict[CompareKey, float | None]:
    return {key: row.tokens_per_s if row.status == "ok" else None for key, row in comparison_keys(result)}


COMPARE = CompareRule[PaddingResult](
    figures=comparison_figures, key_names=("strategy", "kernel"), metric="tokens_per_s", metric_label="tokens/s",
    show=lambda value: f"{value:,.0f}", higher_is_faster=True,
    batch_sizes=lambda result: {key: batch_cell(row) for key, row in comparison_keys(result)},
    spreads=lambda result: {key: row.spread for key, row in comparison_keys(result)},
    row_gpus=lambda result: {key: row.scaling.gpus for key, row in comparison_keys(result) if row.scaling})
