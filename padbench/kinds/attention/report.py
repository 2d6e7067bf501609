"""Attention sweep results for people (one table per metric) and tools (CSV rows, one per cell).

Tables have a row per sequence length and a column per kernel. A cell without a figure shows its status
(`oom`, `unsupported`, `error`) and the reasons are listed once under the tables; a figure that was not
measured is never printed as a number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from padbench.kinds.attention.contract import AttentionCell, AttentionResult
from padbench.report.cells import MISSING, format_bytes
from padbench.report.columns import align
from padbench.report.kind import CompareKey, CompareRule, RunFacts
from padbench.report.partial import partial_lines

BASELINE = "naive"
CellFormatter = Callable[[AttentionCell, AttentionCell | None], str | None]


def speedup_vs_naive(cell: AttentionCell, naive: AttentionCell | None) -> float | None:
    if naive is None or naive.median_ms is None or cell.median_ms is None or cell.median_ms <= 0:
        return None
    return naive.median_ms / cell.median_ms


def memory_reduction_vs_naive(cell: AttentionCell, naive: AttentionCell | None) -> float | None:
    if naive is None or not naive.peak_memory_bytes or not cell.peak_memory_bytes:
        return None
    return naive.peak_memory_bytes / cell.peak_memory_bytes


def _time(cell: AttentionCell, naive: AttentionCell | None) -> str | None:
    if cell.median_ms is None:
        return None
    spread = ""
    if cell.p10_ms is not None and cell.p90_ms is not None and cell.median_ms > 0:
        spread = f" ±{50 * (cell.p90_ms - cell.p10_ms) / cell.median_ms:.0f}%"
    return f"{cell.median_ms:.3g}{spread}"


def _optional(pattern: str, value: float | None, suffix: str = "") -> str | None:
    return None if value is None else format(value, pattern) + suffix


# (title, formatter): the order the tables print in.
METRICS: tuple[tuple[str, CellFormatter], ...] = (
    ("time per call, ms (median ±half the p10–p90 spread)", _time),
    ("achieved TFLOP/s", lambda cell, _: _optional(".3g", cell.tflops)),
    ("fraction of the matmul rate", lambda cell, _: _optional(".0%", cell.fraction_of_matmul)),
    ("peak memory above the inputs", lambda cell, _: None if cell.peak_memory_bytes is None
        else format_bytes(cell.peak_memory_bytes)),
    ("relative error vs float64", lambda cell, _: _optional(".1e", cell.rel_error)),
    ("first call (warm-up, incl. compilation), ms", lambda cell, _: _optional(".3g", cell.warmup_ms)),
    ("speed-up vs naive", lambda cell, naive: _optional(".2f", speedup_vs_naive(cell, naive), "×")),
    ("memory reduction vs naive", lambda cell, naive: _optional(".1f", memory_reduction_vs_naive(cell, naive), "×")),
)


def _grid(result: AttentionResult) -> tuple[list[int], list[str], dict[tuple[str, int], AttentionCell]]:
    kernels = list(dict.fromkeys(cell.kernel for cell in result.cells))
    lengths = sorted({cell.seq_len for cell in result.cells})
    return lengths, kernels, {(cell.kernel, cell.seq_len): cell for cell in result.cells}


def _show(cell: AttentionCell | None, naive: AttentionCell | None, formatter: CellFormatter) -> str:
    if cell is None:
        return MISSING
    if cell.status != "ok":
        return cell.status
    return formatter(cell, naive) or MISSING


def _table(title: str, formatter: CellFormatter, result: AttentionResult) -> list[str]:
    lengths, kernels, cells = _grid(result)
    rows = [("N", *kernels)]
    for length in lengths:
        naive = cells.get((BASELINE, length))
        rows.append((str(length), *(_show(cells.get((kernel, length)), naive, formatter) for kernel in kernels)))
    return [title, *align(rows, rows[0])]


def _header(result: AttentionResult) -> list[str]:
    spec, env = result.spec, result.environment
    heads = f"H{spec.heads}" + (f" (kv {spec.kv_heads})" if spec.kv_heads and spec.kv_heads != spec.heads else "")
    layout = f"varlen ({spec.varlen.distribution})" if spec.layout == "varlen" else "dense"
    matmul = MISSING if result.matmul_tflops is None else f"{result.matmul_tflops:.1f} TFLOP/s"
    return [
        f"attention sweep{f' {spec.name!r}' if spec.name else ''}: B{spec.batch} {heads} D{spec.head_dim}, "
        f"{spec.dtype}, {spec.direction}, {'causal' if spec.causal else 'non-causal'}, {layout}",
        f"device: {env.gpu_name or env.device} · torch {env.torch} · {spec.dtype} matmul {matmul} (this run)",
        "TFLOP/s count 4·B·H·N²·D per forward (per document for varlen), halved when causal, ×2.5 with backward",
    ]


def _notes(result: AttentionResult) -> list[str]:
    """Each distinct reason once, with the lengths it applies to."""
    grouped: dict[tuple[str, str, str], list[int]] = {}
    for cell in result.cells:
        if cell.status != "ok":
            grouped.setdefault((cell.kernel, cell.status, cell.reason or "no reason recorded"), []).append(cell.seq_len)
    if not grouped:
        return []
    lines = ["cells without figures:"]
    for (kernel, status, reason), lengths in grouped.items():
        lines.append(f"  {kernel} N={','.join(map(str, sorted(lengths)))}: {status}: {reason}")
    return lines


def render_table(result: AttentionResult) -> str:
    header = [*partial_lines(result.partial, "cells"), *_header(result)]
    sections = [header] + [_table(title, formatter, result) for title, formatter in METRICS]
    notes = _notes(result)
    if notes:
        sections.append(notes)
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def csv_rows(result: AttentionResult) -> list[dict[str, Any]]:
    spec = result.spec
    shared = {"batch": spec.batch, "heads": spec.heads, "kv_heads": spec.kv_heads or spec.heads,
              "head_dim": spec.head_dim, "dtype": spec.dtype, "direction": spec.direction, "causal": spec.causal,
              "layout": spec.layout, "device": result.environment.gpu_name or result.environment.device,
              "matmul_tflops": result.matmul_tflops}
    naive = {cell.seq_len: cell for cell in result.cells if cell.kernel == BASELINE}
    return [{**shared, **cell.model_dump(),
             "speedup_vs_naive": speedup_vs_naive(cell, naive.get(cell.seq_len)),
             "memory_reduction_vs_naive": memory_reduction_vs_naive(cell, naive.get(cell.seq_len))}
            for cell in result.cells]


def run_facts(result: AttentionResult) -> RunFacts:
    """An attention sweep runs no model: its shape stands for one."""
    spec = result.spec
    return RunFacts(model=f"attention B{spec.batch} H{spec.heads} D{spec.head_dim}", dtype=spec.dtype,
                    mode=spec.direction)


def comparison_figures(result: AttentionResult) -> dict[CompareKey, float | None]:
    return {(cell.kernel, str(cell.seq_len)): cell.median_ms if cell.status == "ok" else None
            for cell in result.cells}


COMPARE = CompareRule[AttentionResult](
    figures=comparison_figures, key_names=("kernel", "seq_len"), metric="median_ms",
    metric_label="median time per call", show=lambda value: f"{value:.3g} ms", higher_is_faster=False,
    sort_key=lambda key: (key[0], int(key[1])))
