"""Padding results for people (a table) and tools (CSV rows).

A figure that was not measured prints as "—", never as a number; an invalid or failed row says why in a
numbered note under the table, so the columns stay readable.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.results import MemoryStats, PaddingResult, StrategyResult

MISSING = "—"
COLUMNS = ("strategy", "kernel", "batch", "tokens/s", "vs static", "padding eff.", "MFU", "peak memory",
           "max logit error", "valid")
RIGHT_ALIGNED = frozenset({"batch", "tokens/s", "vs static", "padding eff.", "MFU", "peak memory"})


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


def _validity(row: StrategyResult, notes: list[str]) -> str:
    if row.status == "ok":
        return "yes"
    notes.append(row.invalid_reason or row.error or "no reason recorded")
    return f"{'no' if row.status == 'invalid' else 'failed'} [{len(notes)}]"


def _cells(row: StrategyResult, notes: list[str]) -> tuple[str, ...]:
    batch = "—" if row.batch_size is None else str(row.batch_size)  # None: `auto` could not be probed
    return (row.label, row.kernel, batch, _number(row.tokens_per_s, ",.0f"),
            _number(row.speedup_vs_static, ".2f") + ("×" if row.speedup_vs_static is not None else ""),
            _number(row.padding_efficiency, ".2f"), _number(row.mfu, ".2f"), format_memory(row.memory),
            _logit_error(row),
            _validity(row, notes))


def _align(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS))]
    lines = []
    for row in rows:
        cells = [cell.rjust(width) if COLUMNS[column] in RIGHT_ALIGNED else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return lines


def _header(result: PaddingResult) -> list[str]:
    spec, env = result.spec, result.environment
    model = spec.model.preset or spec.model.path or "custom GPT-2"
    device = env.gpu_name or env.device
    libraries = [f"torch {env.torch}"] + [f"{name} {version}" for name, version in (
        ("transformers", env.transformers), ("flash-attn", env.flash_attn),
        ("flash-attn-cute", env.flash_attn_cute), ("CUDA", env.cuda), ("driver", env.driver)) if version]
    return [
        f"padding benchmark · {model} ({result.model_parameters / 1e6:.1f}M parameters) · {spec.dtype} · "
        f"{spec.mode}{' · compiled' if spec.compile else ''} · {device} on {env.hostname} · {env.started_at}",
        f"{result.num_sequences:,} sequences, {result.real_tokens_total:,} real tokens, max_length "
        f"{spec.data.max_length}, from {spec.data.source} (digest {(env.dataset_digest or MISSING)[:12]})",
        " · ".join(libraries),
    ]


def header_lines(result: PaddingResult) -> list[str]:
    return _header(result)


def table_rows(result: PaddingResult) -> tuple[list[tuple[str, ...]], list[str]]:
    """The table's cells, one tuple per strategy in COLUMNS order, and the numbered notes they refer to."""
    notes: list[str] = []
    return [_cells(row, notes) for row in result.strategies], notes


def render_table(result: PaddingResult) -> str:
    cells, notes = table_rows(result)
    rows = [COLUMNS, *cells]
    lines = [*_header(result), "", *_align(rows)]
    if notes:
        lines += ["", *(f"[{number}] {note}" for number, note in enumerate(notes, start=1))]
    return "\n".join(lines) + "\n"


def csv_rows(result: PaddingResult) -> list[dict[str, Any]]:
    """One row per strategy, every measured figure in plain units (bytes, seconds, tokens/s)."""
    rows = []
    for row in result.strategies:
        memory = row.memory or MemoryStats()
        rows.append({
            "strategy": row.strategy, "n_bins": row.n_bins, "attention": row.attention, "kernel": row.kernel,
            "batch_size": row.batch_size, "status": row.status, "reason": row.invalid_reason or row.error,
            "tokens_per_s": row.tokens_per_s, "speedup_vs_static": row.speedup_vs_static,
            "median_batch_tokens_per_s": row.median_batch_tokens_per_s,
            "p90_batch_tokens_per_s": row.p90_batch_tokens_per_s, "padding_efficiency": row.padding_efficiency,
            "mfu": row.mfu, "real_tokens": row.real_tokens, "computed_tokens": row.computed_tokens,
            "batches": row.batches, "measured_seconds": row.measured_seconds, "warmup_seconds": row.warmup_seconds,
            "peak_allocated_bytes": memory.peak_allocated_bytes, "peak_reserved_bytes": memory.peak_reserved_bytes,
            "device_used_bytes": memory.device_used_bytes, "host_peak_rss_bytes": memory.host_peak_rss_bytes,
            "max_logit_error": row.max_logit_error, "logit_tolerance": row.logit_tolerance,
            "correctness_passed": row.correctness_passed,
        })
    return rows
