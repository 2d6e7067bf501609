"""An attention sweep's plot: time per call and peak memory against sequence length, log axes, one line per
kernel."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from padbench.kinds.attention.contract import AttentionResult
from padbench.report.plotting import job_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Jobs = list[tuple[int | None, AttentionResult]]


def _sweep(axes: Axes, jobs: Jobs, metric: str, label: str) -> None:
    for job_id, result in jobs:
        lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for cell in result.cells:
            value = getattr(cell, metric)
            if cell.status == "ok" and value is not None and value > 0:
                lines[cell.kernel].append((cell.seq_len, value / (1 << 20) if metric == "peak_memory_bytes" else value))
        for kernel, points in lines.items():
            points.sort()
            prefix = f"{job_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([n for n, _ in points], [v for _, v in points], marker="o", label=prefix + kernel)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("sequence length")
    axes.set_ylabel(label)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8)


def attention_plot(plt: Any, jobs: Jobs) -> Figure:
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(13, 5.5))
    _sweep(time_axes, jobs, "median_ms", "median time per call, ms")
    _sweep(memory_axes, jobs, "peak_memory_bytes", "peak memory above the inputs, MiB")
    return figure
