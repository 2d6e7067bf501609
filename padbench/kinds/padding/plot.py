"""A padding job's plot: tokens/s per strategy × kernel as bars (one colour per job), each labelled with its
padding efficiency and, where the row was measured with repeats, whiskered with its 95% interval; when a job
measured a layout at several batch sizes, a second panel draws tokens/s against batch size, and where a job is a
scaling axis (`gpus: [1, 2, 4]`), tokens/s per GPU against the GPU count instead, each point labelled with its
scaling efficiency. Rows without a
valid figure are left out of the picture, never drawn as zero."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel
from padbench.kinds.padding.scaling import scaling_curves
from padbench.report.plotting import interval_bars, job_name, panels, rate_curve_axes, rate_formatter

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Jobs = list[tuple[int | None, PaddingResult]]


def _valid_rows(result: PaddingResult) -> list[StrategyResult]:
    return [row for row in result.strategies if row.status == "ok" and row.tokens_per_s is not None]


def batch_curves(result: PaddingResult) -> dict[str, list[tuple[int, float]]]:
    """tokens/s against batch size for each strategy × kernel measured at two or more batch sizes."""
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in _valid_rows(result):
        if row.batch_size is not None:
            curves[f"{row.label} · {compare_kernel(row)}"].append((row.batch_size, row.tokens_per_s or 0.0))
    return {key: sorted(points) for key, points in curves.items() if len({size for size, _ in points}) > 1}


def _bar_key(row: StrategyResult) -> str:
    return f"{row.label}\n{compare_kernel(row)}"  # a mixture's rows of two experts implementations are two bars


def _bars(axes: Axes, jobs: Jobs) -> None:
    padding_jobs = jobs
    keys = list(dict.fromkeys(_bar_key(row) for _, result in padding_jobs for row in _valid_rows(result)))
    width = 0.8 / len(jobs)
    for position, (job_id, result) in enumerate(padding_jobs):
        best: dict[str, StrategyResult] = {}
        for row in _valid_rows(result):  # a layout measured at several batch sizes shows its fastest
            if _bar_key(row) not in best or (row.tokens_per_s or 0) > (best[_bar_key(row)].tokens_per_s or 0):
                best[_bar_key(row)] = row
        xs = [index + (position - (len(jobs) - 1) / 2) * width for index, key in enumerate(keys) if key in best]
        rows = [best[key] for key in keys if key in best]
        bars = axes.bar(xs, [row.tokens_per_s or 0.0 for row in rows], width,
                        label=job_name(job_id, result, len(jobs) > 1))
        interval_bars(axes, xs, [row.spread for row in rows])
        labels = [f"{row.padding_efficiency:.0%} eff." if row.padding_efficiency is not None else "" for row in rows]
        axes.bar_label(bars, labels=labels, fontsize=8, padding=2)
    axes.set_xticks(range(len(keys)), keys, fontsize=9)
    axes.set_ylabel("tokens/s (real tokens, higher is better)")
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(axis="y", alpha=0.3)
    axes.set_title("throughput per layout (label: padding efficiency; whiskers: 95% interval)", fontsize=10)
    if len(jobs) > 1:
        axes.legend(fontsize=8)


def _curves(axes: Axes, jobs: Jobs) -> None:
    for job_id, result in jobs:
        for key, points in batch_curves(result).items():
            prefix = f"{job_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([size for size, _ in points], [tps for _, tps in points], marker="o", label=prefix + key)
    rate_curve_axes(axes, "batch size", "tokens/s", "tokens/s against batch size")


def _scaling(axes: Axes, jobs: Jobs) -> None:
    for job_id, result in jobs:
        for key, points in scaling_curves(result).items():
            prefix = f"{job_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            counts = [gpus for gpus, _, _ in points]
            per_gpu = [rate for _, rate, _ in points]
            axes.plot(counts, per_gpu, marker="o", label=prefix + key)
            for count, rate, efficiency in points[1:]:
                if efficiency is not None:
                    axes.annotate(f"{efficiency:.0%}", (count, rate), textcoords="offset points", xytext=(0, 6),
                                  fontsize=8, ha="center")
    rate_curve_axes(axes, "GPUs", "tokens/s per GPU", "tokens/s per GPU against GPU count (label: scaling efficiency)")


def padding_plot(plt: Any, jobs: Jobs) -> Figure:
    if any(scaling_curves(result) for _, result in jobs):
        return panels(plt, jobs, _bars, _scaling, (9, 13))
    with_curves = any(batch_curves(result) for _, result in jobs)
    return panels(plt, jobs, _bars, _curves if with_curves else None, (9, 13))
