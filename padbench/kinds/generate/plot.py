"""A generate job's plot: output tokens/s per strategy and reference (whiskered with the 95% interval), and with
a context table decode tokens/s against context length."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from padbench.kinds.generate.contract import GenerateResult, GenerateRow
from padbench.kinds.generate.verdict import row_label
from padbench.report.plotting import interval_bars, job_name, panels, rate_curve_axes, rate_formatter

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Jobs = list[tuple[int | None, GenerateResult]]


def _generate_rows(result: GenerateResult) -> list[GenerateRow]:
    return [row for row in result.rows if row.status == "ok" and row.output_tokens_per_s is not None]


def _generate_key(row: GenerateRow) -> str:
    return f"{row_label(row)}\n{row.kernel}" + ("" if row.context is None else f"\ncontext {row.context:,}")


def _generate_bars(axes: Axes, jobs: Jobs) -> None:
    """Output tokens/s per row, one colour per job; reference rows grey and hatched, whatever the job."""
    results = jobs
    keys = list(dict.fromkeys(_generate_key(row) for _, result in results for row in _generate_rows(result)))
    width = 0.8 / len(jobs)
    for position, (job_id, result) in enumerate(results):
        rows = {_generate_key(row): row for row in _generate_rows(result)}
        xs = [index + (position - (len(jobs) - 1) / 2) * width for index, key in enumerate(keys) if key in rows]
        shown = [rows[key] for key in keys if key in rows]
        colour = f"C{position}"
        axes.bar(xs, [row.output_tokens_per_s or 0.0 for row in shown], width,
                 color=["0.7" if row.reference else colour for row in shown], edgecolor=colour,
                 hatch=["//" if row.reference else "" for row in shown], label=job_name(job_id, result, len(jobs) > 1))
        interval_bars(axes, xs, [row.spread for row in shown])
    # Beyond about five bars labels of two or three lines overlap: then each is one slanted line.
    crowded = len(keys) > 5
    axes.set_xticks(range(len(keys)), [key.replace("\n", " · ") for key in keys] if crowded else keys, fontsize=8,
                    rotation=30 if crowded else 0, ha="right" if crowded else "center", rotation_mode="anchor")
    axes.set_ylabel("output tokens/s (higher is better)")
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(axis="y", alpha=0.3)
    axes.set_title("output tokens/s per strategy (grey, hatched: transformers references; whiskers: 95% interval)",
                   fontsize=10)
    if len(jobs) > 1:
        axes.legend(fontsize=8)


def context_curves(result: GenerateResult) -> dict[str, list[tuple[int, float]]]:
    """Decode tokens/s against context length for each strategy (or reference) and kernel."""
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in result.rows:
        if row.context is not None and row.status == "ok" and row.decode_tokens_per_s is not None:
            curves[f"{row_label(row)} · {row.kernel}"].append((row.context, row.decode_tokens_per_s))
    return {key: sorted(points) for key, points in curves.items()}


def _context_panel(axes: Axes, jobs: Jobs) -> None:
    lengths: set[int] = set()
    for job_id, result in jobs:
        for key, points in context_curves(result).items():
            prefix = f"{job_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([length for length, _ in points], [rate for _, rate in points], marker="o",
                      linestyle="--" if key.startswith("ref: ") else "-", label=prefix + key)
            lengths.update(length for length, _ in points)
    rate_curve_axes(axes, "context length (prompt tokens)", "decode tokens/s",
                     "decode tokens/s against context length")
    ticks = sorted(lengths)  # the lengths measured, written out, rather than powers of two
    axes.set_xticks(ticks, [f"{length:,}" for length in ticks], fontsize=8)


def generate_plot(plt: Any, jobs: Jobs) -> Figure:
    with_context = any(context_curves(result) for _, result in jobs)
    return panels(plt, jobs, _generate_bars, _context_panel if with_context else None, (10, 14))
