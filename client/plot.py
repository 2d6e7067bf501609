"""`padbench plot`: the results as a picture (PNG or SVG), drawn with matplotlib.

Padding jobs: tokens/s per strategy × kernel as bars (one colour per job), each labelled with its
padding efficiency and, where the row was measured with repeats, whiskered with its 95% interval; when a
job measured a layout at several batch sizes, a second panel draws tokens/s against batch size. Attention
sweeps: time per call and peak memory against sequence length, log axes, one line per kernel. Generate jobs:
output tokens/s per strategy and reference (whiskered with the 95% interval), and with a context table decode
tokens/s against context length. Rows without a valid figure are left out of the picture, never drawn as zero.

matplotlib is imported only here, when a plot is drawn, so the rest of the client works without it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from padbench.contract.attention_sweep import AttentionResult
from padbench.contract.generate import GenerateResult, GenerateRow
from padbench.contract.padding import PaddingResult, StrategyResult
from padbench.contract.registry import Registry
from padbench.contract.results import JobResultBase, Spread
from padbench.report.experts import compare_kernel
from padbench.report.generate_verdict import row_label
from padbench.report.identity import title
from padbench.report.kind import kinds_in_words, report_for

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Labelled = tuple[int | None, JobResultBase]
FORMATS = (".png", ".svg")
MISSING_EXTRA = "padbench plot needs matplotlib: pip install 'padbench[plot]'"


class PlotError(ValueError):
    """The plot cannot be drawn as asked (mixed kinds, an unknown file type, matplotlib missing)."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ModuleNotFoundError as error:
        raise PlotError(MISSING_EXTRA) from error
    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def _name(job_id: int | None, result: JobResultBase, several: bool) -> str:
    return title(result, job_id) if several else (f"job {job_id}" if job_id is not None else "this run")


def _valid_rows(result: PaddingResult) -> list[StrategyResult]:
    return [row for row in result.strategies if row.status == "ok" and row.tokens_per_s is not None]


def batch_curves(result: PaddingResult) -> dict[str, list[tuple[int, float]]]:
    """tokens/s against batch size for each strategy × kernel measured at two or more batch sizes."""
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for row in _valid_rows(result):
        if row.batch_size is not None:
            curves[f"{row.label} · {compare_kernel(row)}"].append((row.batch_size, row.tokens_per_s or 0.0))
    return {key: sorted(points) for key, points in curves.items() if len({size for size, _ in points}) > 1}


def rate_formatter() -> Any:
    """Ticks with an SI prefix and enough digits to tell them apart: 500, 1k, 1.5k, 2k, 1.25M."""
    from matplotlib import ticker

    return ticker.EngFormatter(sep="")


def _bar_key(row: StrategyResult) -> str:
    return f"{row.label}\n{compare_kernel(row)}"  # a mixture's rows of two experts implementations are two bars


def _interval_bars(axes: Axes, xs: list[float], spreads: list[Spread | None]) -> None:
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


def _bars(axes: Axes, jobs: list[Labelled]) -> None:
    padding_jobs = [(job_id, result) for job_id, result in jobs if isinstance(result, PaddingResult)]
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
                        label=_name(job_id, result, len(jobs) > 1))
        _interval_bars(axes, xs, [row.spread for row in rows])
        labels = [f"{row.padding_efficiency:.0%} eff." if row.padding_efficiency is not None else "" for row in rows]
        axes.bar_label(bars, labels=labels, fontsize=8, padding=2)
    axes.set_xticks(range(len(keys)), keys, fontsize=9)
    axes.set_ylabel("tokens/s (real tokens, higher is better)")
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(axis="y", alpha=0.3)
    axes.set_title("throughput per layout (label: padding efficiency; whiskers: 95% interval)", fontsize=10)
    if len(jobs) > 1:
        axes.legend(fontsize=8)


def _curves(axes: Axes, jobs: list[Labelled]) -> None:
    for job_id, result in jobs:
        assert isinstance(result, PaddingResult)
        for key, points in batch_curves(result).items():
            prefix = f"{_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([size for size, _ in points], [tps for _, tps in points], marker="o", label=prefix + key)
    _rate_curve_axes(axes, "batch size", "tokens/s", "tokens/s against batch size")


def _rate_curve_axes(axes: Axes, x_label: str, y_label: str, heading: str) -> None:
    """A panel of rates against a size that doubles (batch size, context length): log₂ x, SI-prefixed y."""
    axes.set_xscale("log", base=2)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.yaxis.set_major_formatter(rate_formatter())
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title(heading, fontsize=10)


def _sweep(axes: Axes, jobs: list[Labelled], metric: str, label: str) -> None:
    for job_id, result in jobs:
        assert isinstance(result, AttentionResult)
        lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for cell in result.cells:
            value = getattr(cell, metric)
            if cell.status == "ok" and value is not None and value > 0:
                lines[cell.kernel].append((cell.seq_len, value / (1 << 20) if metric == "peak_memory_bytes" else value))
        for kernel, points in lines.items():
            points.sort()
            prefix = f"{_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([n for n, _ in points], [v for _, v in points], marker="o", label=prefix + kernel)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("sequence length")
    axes.set_ylabel(label)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=8)


def _figure_title(jobs: list[Labelled]) -> str:
    if len(jobs) == 1:
        return title(jobs[0][1], jobs[0][0])
    return "\n".join(title(result, job_id) for job_id, result in jobs)


Panel = Callable[["Axes", list[Labelled]], None]


def _panels(plt: Any, jobs: list[Labelled], bars: Panel, beside: Panel | None, widths: tuple[float, float]) -> Figure:
    """A panel of bars and, where the jobs have something to draw there, a second beside it (`widths`: the
    figure's width with one panel and with two)."""
    figure, panels = plt.subplots(1, 1 if beside is None else 2, figsize=(widths[beside is not None], 5.5),
                                  squeeze=False)
    bars(panels[0][0], jobs)
    if beside is not None:
        beside(panels[0][1], jobs)
    return figure


def _padding_panels(plt: Any, jobs: list[Labelled]) -> Figure:
    with_curves = any(batch_curves(result) for _, result in jobs if isinstance(result, PaddingResult))
    return _panels(plt, jobs, _bars, _curves if with_curves else None, (9, 13))


def _attention_panels(plt: Any, jobs: list[Labelled]) -> Figure:
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(13, 5.5))
    _sweep(time_axes, jobs, "median_ms", "median time per call, ms")
    _sweep(memory_axes, jobs, "peak_memory_bytes", "peak memory above the inputs, MiB")
    return figure


def _generate_rows(result: GenerateResult) -> list[GenerateRow]:
    return [row for row in result.rows if row.status == "ok" and row.output_tokens_per_s is not None]


def _generate_key(row: GenerateRow) -> str:
    return f"{row_label(row)}\n{row.kernel}" + ("" if row.context is None else f"\ncontext {row.context:,}")


def _generate_bars(axes: Axes, jobs: list[Labelled]) -> None:
    """Output tokens/s per row, one colour per job; reference rows grey and hatched, whatever the job."""
    results = [(job_id, result) for job_id, result in jobs if isinstance(result, GenerateResult)]
    keys = list(dict.fromkeys(_generate_key(row) for _, result in results for row in _generate_rows(result)))
    width = 0.8 / len(jobs)
    for position, (job_id, result) in enumerate(results):
        rows = {_generate_key(row): row for row in _generate_rows(result)}
        xs = [index + (position - (len(jobs) - 1) / 2) * width for index, key in enumerate(keys) if key in rows]
        shown = [rows[key] for key in keys if key in rows]
        colour = f"C{position}"
        axes.bar(xs, [row.output_tokens_per_s or 0.0 for row in shown], width,
                 color=["0.7" if row.reference else colour for row in shown], edgecolor=colour,
                 hatch=["//" if row.reference else "" for row in shown], label=_name(job_id, result, len(jobs) > 1))
        _interval_bars(axes, xs, [row.spread for row in shown])
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


def _context_panel(axes: Axes, jobs: list[Labelled]) -> None:
    lengths: set[int] = set()
    for job_id, result in jobs:
        assert isinstance(result, GenerateResult)
        for key, points in context_curves(result).items():
            prefix = f"{_name(job_id, result, False)} · " if len(jobs) > 1 else ""
            axes.plot([length for length, _ in points], [rate for _, rate in points], marker="o",
                      linestyle="--" if key.startswith("ref: ") else "-", label=prefix + key)
            lengths.update(length for length, _ in points)
    _rate_curve_axes(axes, "context length (prompt tokens)", "decode tokens/s",
                     "decode tokens/s against context length")
    ticks = sorted(lengths)  # the lengths measured, written out, rather than powers of two
    axes.set_xticks(ticks, [f"{length:,}" for length in ticks], fontsize=8)


def _generate_panels(plt: Any, jobs: list[Labelled]) -> Figure:
    with_context = any(context_curves(result) for _, result in jobs if isinstance(result, GenerateResult))
    return _panels(plt, jobs, _generate_bars, _context_panel if with_context else None, (10, 14))


# One drawing per job kind: pyplot and the jobs (all of that kind) in, their figure out, before its title.
PLOTS: Registry[Callable[[Any, list[Labelled]], Figure]] = Registry("job kind")
PLOTS.add("padding", _padding_panels)
PLOTS.add("attention", _attention_panels)
PLOTS.add("generate", _generate_panels)


def draw(jobs: list[Labelled]) -> Figure:
    kinds = {result.kind for _, result in jobs}
    if len(kinds) != 1:
        raise PlotError(f"plot jobs of one kind at a time: {kinds_in_words()}")
    kind = kinds.pop()
    if kind not in PLOTS:
        raise PlotError(f"padbench plot cannot draw {report_for(jobs[0][1]).plural} yet")
    figure = PLOTS.get(kind)(_pyplot(), jobs)
    figure.suptitle(_figure_title(jobs), fontsize=11)
    figure.tight_layout()
    return figure


def save_plot(jobs: list[Labelled], output: Path) -> None:
    if output.suffix.lower() not in FORMATS:
        raise PlotError(f"-o {output}: write a .png or .svg file")
    figure = draw(jobs)
    try:
        figure.savefig(output, dpi=150)
    except OSError as error:
        raise PlotError(f"cannot write {output}: {error.strerror}") from error
    finally:
        _pyplot().close(figure)
