"""What every kind's plot is drawn with: the jobs as (id, result) pairs, rate axes with SI-prefixed ticks,
95% interval whiskers, and a figure of one or two panels.

matplotlib is imported by the caller (`padbench plot`) and handed in, so nothing here loads it at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from padbench.contract.results import JobResultBase, Spread
from padbench.report.identity import title

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

R = TypeVar("R", bound=JobResultBase)
Labelled = tuple[int | None, JobResultBase]


def job_name(job_id: int | None, result: JobResultBase, several: bool) -> str:
    return title(result, job_id) if several else (f"job {job_id}" if job_id is not None else "this run")


def rate_formatter() -> Any:
    """Ticks with an SI prefix and enough digits to tell them apart: 500, 1k, 1.5k, 2k, 1.25M."""
    from matplotlib import ticker

    return ticker.EngFormatter(sep="")


def interval_bars(axes: Axes, xs: list[float], spreads: list[Spread | None]) -> None:
    """Whiskers spanning each row's 95% interval, for the rows measured with repeats (a single repeat has none).

    Drawn around the interval's own centre (the mean repeat rate) rather than the bar's top: the bar is
    Σ tokens / Σ seconds over all repeats, which need not sit at the interval's middle."""
    spans = [(x, spread.ci95_low_tokens_per_s, spread.ci95_high_tokens_per_s)
             for x, spread in zip(xs, spreads, strict=True) if spread is not None]
    if not spans:
        return
    axes.errorbar([x for x, _, _ in spans], [(low + high) / 2 for _, low, high in spans],
                  yerr=[(high - low) / 2 for _, low, high in spans], fmt="none", ecolor="black", elinewidth=1,
                  capsize=3)


def rate_curve_axes(axes: Axes, x_label: str, y_label: str, heading: str) -> None:
    """A panel of rates against a size that doubles (batch size, context length): log₂ x, SI-prefixed y."""
    axes.set_xscale("log", base=2)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title(heading, fontsize=10)


Panel = Callable[["Axes", list[tuple[int | None, R]]], None]


def panels(plt: Any, jobs: list[tuple[int | None, R]], bars: Panel[R], beside: Panel[R] | None,
           widths: tuple[float, float]) -> Figure:
    """A panel of bars and, where the jobs have something to draw there, a second beside it (`widths`: the
    figure's width with one panel and with two)."""
    figure, panels = plt.subplots(1, 1 if beside is None else 2, figsize=(widths[beside is not None], 5.5),
                                  squeeze=False)
    bars(panels[0][0], jobs)
    if beside is not None:
        beside(panels[0][1], jobs)
    return figure
