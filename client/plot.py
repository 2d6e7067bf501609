"""`padbench plot`: the results as a picture (PNG or SVG), drawn with matplotlib.

Each kind draws its own jobs (its record's `plot`, in `padbench/kinds/<kind>/plot.py`); this module checks the
jobs are of one kind, hands them over with pyplot, titles the figure and writes the file.

matplotlib is imported only here, when a plot is drawn, so the rest of the client works without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from padbench.kinds.record import kind_spec, kinds_in_words
from padbench.report.identity import title
from padbench.report.plotting import Labelled

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


def _figure_title(jobs: list[Labelled]) -> str:
    if len(jobs) == 1:
        return title(jobs[0][1], jobs[0][0])
    return "\n".join(title(result, job_id) for job_id, result in jobs)


def draw(jobs: list[Labelled]) -> Figure:
    kinds = {result.kind for _, result in jobs}
    if len(kinds) != 1:
        raise PlotError(f"plot jobs of one kind at a time: {kinds_in_words()}")
    kind = kind_spec(kinds.pop())
    if kind.plot is None:
        raise PlotError(f"padbench plot cannot draw {kind.report.plural} yet")
    figure = kind.plot(_pyplot(), jobs)
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
