"""A tune's plot: every measured trial's tokens/s against its peak memory, one colour per fate, the winner
ringed. Trials with no figure (pruned, failed, not reached) are left out of the picture, never drawn as zero."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from padbench.kinds.tune.contract import TuneResult
from padbench.report.plotting import rate_formatter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Jobs = list[tuple[int | None, TuneResult]]
COLOURS = {"finalist": "tab:green", "stopped": "tab:blue"}


def tune_plot(plt: Any, jobs: Jobs) -> Figure:
    figure, axes = plt.subplots(1, 1, figsize=(9, 5.5))
    for job_id, result in jobs:
        prefix = "" if len(jobs) == 1 else f"job {job_id} · "
        for fate, colour in COLOURS.items():
            points = [(trial.peak_memory_bytes / 2**30, trial.tokens_per_s) for trial in result.trials
                      if trial.fate == fate and trial.tokens_per_s and trial.peak_memory_bytes]
            if points:
                axes.scatter(*zip(*points, strict=True), color=colour, label=f"{prefix}{fate}", alpha=0.8)
        if result.winner is not None:
            chosen = result.trials[result.winner]
            if chosen.tokens_per_s and chosen.peak_memory_bytes:
                axes.scatter([chosen.peak_memory_bytes / 2**30], [chosen.tokens_per_s], s=220, facecolors="none",
                             edgecolors="black", linewidths=2, label=f"{prefix}chosen: {chosen.config.label}")
    axes.set_xlabel("peak memory (GiB)")
    axes.set_ylabel("tokens/s (its last round)")
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title("every measured configuration: tokens/s against peak memory", fontsize=10)
    return figure
