"""Generate results for people (a table) and tools (CSV rows).

One row per strategy (and context length, with a context table), then the reference rows of the libraries
users would otherwise call, marked `ref:`. The headline is output tokens/s: Σ output tokens / Σ measured
seconds over the repeats. A figure that was not measured prints as "—"; an invalid or failed row says why in
a numbered note under the table. The table ends with the verdict (`padbench.kinds.generate.verdict`) and,
with a context table, decode tokens/s per context length.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.table import ResultTable, TableColumn, TableRow
from padbench.kinds.generate.contract import GenerateResult, GenerateRow, Latency, LengthsFromField, UniformLengths
from padbench.kinds.generate.verdict import contexts, row_label, table_order, verdict_lines, winner
from padbench.report.attention_auto import attention_auto_lines
from padbench.report.cells import (
    MISSING,
    WINNER_MARK,
    activity_fields,
    clock_line,
    format_bytes,
    library_line,
    memory_fields,
    probe_cell,
    spread_fields,
    tflops,
    validity,
)
from padbench.report.columns import align
from padbench.report.efficiency import cost_lines, energy_lines
from padbench.report.kind import CompareKey, CompareRule, RunFacts
from padbench.report.noise import compact_rate, is_doubtful
from padbench.report.partial import partial_lines
from padbench.report.table import plain_text

# The latencies under serving benchmarks' names: TTFT, TPOT (per request) and ITL (per token); see GenerateRow.
COLUMNS = ("strategy", "kernel", "context", "batch", "output tok/s", "95% interval", "vs static", "TTFT p50/p99",
           "TPOT p50/p99", "ITL p50/p99", "slot use", "BW util", "MFU", "valid")
RIGHT_ALIGNED = frozenset(COLUMNS[2:-1])
DETAIL_COLUMNS: frozenset[str] = frozenset()  # every column is read on the dashboard too


def _number(value: float | None, pattern: str, suffix: str = "") -> str:
    return MISSING if value is None else format(value, pattern) + suffix


def milliseconds(value: float) -> str:
    """Three significant figures, without an exponent: 0.0412, 3.21, 45.6, 1,234."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def latency(value: Latency | None) -> str:
    return MISSING if value is None else f"{milliseconds(value.p50_ms)}/{milliseconds(value.p99_ms)} ms"


def _interval(row: GenerateRow) -> str:
    if row.spread is None or row.output_tokens_per_s is None:
        return MISSING
    return f"{compact_rate(row.spread.ci95_low_tokens_per_s)}–{compact_rate(row.spread.ci95_high_tokens_per_s)}"


def _cells(row: GenerateRow, notes: list[str], is_winner: bool) -> tuple[str, ...]:
    return (f"{WINNER_MARK if is_winner else ''}{row_label(row)}", row.kernel,
            MISSING if row.context is None else str(row.context),
            MISSING if row.batch_size is None else f"{row.batch_size}{' (auto)' if row.probe else ''}",
            _number(row.output_tokens_per_s, ",.0f"), _interval(row), _number(row.speedup_vs_static, ".2f", "×"),
            latency(row.time_to_first_token), latency(row.time_per_output_token), latency(row.inter_token_latency),
            _number(row.slot_utilization, ".0%"),
            _number(row.bandwidth_utilization, ".2f"), _number(row.mfu, ".2f"), validity(row, notes))


def table_rows(result: GenerateResult) -> tuple[tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The header, the cells (one tuple per row, as the table lists them) and the numbered notes. The context
    column is left out when no row has a context length."""
    notes: list[str] = []
    best = winner(result)
    rows = [_cells(row, notes, row is best) for row in table_order(result)]
    if any(row.context is not None for row in result.rows):
        return COLUMNS, rows, notes
    keep = [index for index, name in enumerate(COLUMNS) if name != "context"]
    return tuple(COLUMNS[index] for index in keep), [tuple(row[index] for index in keep) for row in rows], notes


def output_lengths(result: GenerateResult) -> str:
    lengths = result.spec.output_length
    if isinstance(lengths, UniformLengths):
        return f"output lengths uniform in {lengths.uniform[0]}–{lengths.uniform[1]} tokens"
    if isinstance(lengths, LengthsFromField):
        return f"output lengths of field {lengths.field!r} (at most {lengths.max_tokens} tokens)"
    return f"{lengths} output tokens per request"


def _header(result: GenerateResult) -> list[str]:
    spec, env = result.spec, result.environment
    bandwidth = MISSING if result.copy_bandwidth_gbps is None else f"{result.copy_bandwidth_gbps:,.0f} GB/s"
    return [
        f"generate benchmark · {spec.model.label} ({result.model_parameters / 1e6:.1f}M parameters) · {spec.dtype} · "
        f"{env.gpu_name or env.device} on {env.hostname} · {env.started_at}",
        f"{result.num_requests:,} requests, {result.prompt_tokens_total:,} prompt tokens (up to "
        f"{spec.data.max_length} each, from {spec.data.source}, digest {(env.dataset_digest or MISSING)[:12]}), "
        f"{result.output_tokens_total:,} output tokens ({output_lengths(result)})",
        library_line(env),
        f"a decode step reads {format_bytes(result.weight_bytes)} of weights and "
        f"{format_bytes(result.kv_bytes_per_token)} of KV cache per token of context; measured in this job: copy "
        f"bandwidth {bandwidth} (BW util's denominator), GEMM rate {tflops(result.matmul_tflops)}",
    ]


def probe_lines(result: GenerateResult) -> list[str]:
    """`batch_size: auto`: the OOM probe's bracket and choice, once (every strategy row ran at that size)."""
    probe = next((row.probe for row in result.rows if row.probe is not None), None)
    if probe is None:
        return []
    return [f"batch_size auto: the OOM probe over sequences decoding at once: {probe_cell(probe)} "
            f"({len(probe.probes)} probes, {probe.seconds:.1f} s, margin {probe.margin:.0%})"]


def header_lines(result: GenerateResult) -> list[str]:
    return [*partial_lines(result.partial, "rows"), *_header(result), *probe_lines(result),
            *attention_auto_lines(result.attention_auto), *clock_line(result.environment)]


def context_lines(result: GenerateResult) -> list[str]:
    """Decode tokens/s per context length (rows) for each strategy and kernel (columns): the context table."""
    lengths = [length for length in contexts(result) if length is not None]
    if not lengths:
        return []
    series = list(dict.fromkeys((row_label(row), row.kernel) for row in result.rows if row.context is not None))
    figures = {(row_label(row), row.kernel, row.context): row for row in result.rows}
    table: list[tuple[str, ...]] = [("context", *(f"{label} / {kernel}" for label, kernel in series))]
    for length in lengths:
        cells = []
        for label, kernel in series:
            row = figures.get((label, kernel, length))
            rate = None if row is None or row.status != "ok" else row.decode_tokens_per_s
            cells.append(MISSING if rate is None else f"{rate:,.0f}")
        table.append((f"{length:,}", *cells))
    return ["decode tokens/s by context length:", *align(table, frozenset(table[0]))]


def result_table(result: GenerateResult) -> ResultTable:
    """The table every view renders, rows as `table_order` lists them, the verdict's winner marked."""
    columns, rows, notes = table_rows(result)
    best = winner(result)
    ordered = table_order(result)
    index = {id(row): position for position, row in enumerate(result.rows)}
    return ResultTable(
        header=header_lines(result),
        columns=[TableColumn(name=name, right=name in RIGHT_ALIGNED, detail=name in DETAIL_COLUMNS)
                 for name in columns],
        rows=[TableRow(cells=list(cells), row=index[id(row)],
                       mark="winner" if row is best else "doubtful" if is_doubtful(row) else None)
              for cells, row in zip(rows, ordered, strict=True)],
        notes=notes, verdict=verdict_lines(result), after=context_lines(result) + cost_lines(result)
        + energy_lines([(f"{row_label(row)} / {row.kernel}", row.energy) for row in result.rows], "output"))


def render_table(result: GenerateResult) -> str:
    return plain_text(result_table(result))


def _latency_fields(name: str, value: Latency | None) -> dict[str, Any]:
    return {f"{name}_mean_ms": value.mean_ms if value else None, f"{name}_p50_ms": value.p50_ms if value else None,
            f"{name}_p99_ms": value.p99_ms if value else None, f"{name}_samples": value.samples if value else None}


def csv_rows(result: GenerateResult) -> list[dict[str, Any]]:
    """One row per strategy or reference (and context length), every figure in plain units."""
    return [{
        "strategy": row.strategy, "reference": row.reference, "attention": row.attention, "kernel": row.kernel,
        "context": row.context, "batch_size": row.batch_size, "status": row.status,
        "reason": row.invalid_reason or row.error, "cuda_graphs": row.cuda_graphs,
        "output_tokens_per_s": row.output_tokens_per_s, "total_tokens_per_s": row.total_tokens_per_s,
        "decode_tokens_per_s": row.decode_tokens_per_s, "speedup_vs_static": row.speedup_vs_static,
        **spread_fields(row.spread), **_latency_fields("ttft", row.time_to_first_token),
        **_latency_fields("tpot", row.time_per_output_token), **_latency_fields("itl", row.inter_token_latency),
        "slot_utilization": row.slot_utilization,
        "requests": row.requests, "prompt_tokens": row.prompt_tokens, "output_tokens": row.output_tokens,
        "prompt_pad_tokens": row.prompt_pad_tokens, "decode_steps": row.decode_steps,
        "prefill_steps": row.prefill_steps, "interleaved_prefills": row.interleaved_prefills,
        "bucketed_prefill_steps": row.bucketed_prefill_steps, "bucket_pad_tokens": row.bucket_pad_tokens,
        "capture_seconds": row.capture_seconds, "measured_seconds": row.measured_seconds,
        "warmup_seconds": row.warmup_seconds,
        "kv_cache_bytes": row.kv_cache_bytes, **memory_fields(row.memory),
        "bandwidth_utilization": row.bandwidth_utilization, "mfu": row.mfu, "mfu_vs_matmul": row.mfu_vs_matmul,
        **activity_fields(row.gpu_activity), "correctness_passed": row.correctness_passed,
        "gate_requests": row.gate_requests, "gate_detail": row.gate_detail, "max_logit_error": row.max_logit_error,
        "logit_tolerance": row.logit_tolerance,
    } for row in result.rows]


def run_facts(result: GenerateResult) -> RunFacts:
    return RunFacts(model=result.spec.model.label, dtype=result.spec.dtype, mode="generate")


def comparison_keys(result: GenerateResult) -> list[tuple[CompareKey, GenerateRow]]:
    """Each row by its compare key: strategy (with its context length, in a context table) and kernel."""
    return [((row_label(row) if row.context is None else f"{row_label(row)} @ {row.context}", row.kernel), row)
            for row in result.rows]


def comparison_figures(result: GenerateResult) -> dict[CompareKey, float | None]:
    return {key: row.output_tokens_per_s if row.status == "ok" else None for key, row in comparison_keys(result)}


COMPARE = CompareRule[GenerateResult](
    figures=comparison_figures, key_names=("strategy", "kernel"), metric="output_tokens_per_s",
    metric_label="output tokens/s", show=lambda value: f"{value:,.0f}", higher_is_faster=True,
    batch_sizes=lambda result: {key: MISSING if row.batch_size is None else str(row.batch_size)
                                for key, row in comparison_keys(result)},
    spreads=lambda result: {key: row.spread for key, row in comparison_keys(result)})
