"""Results on a terminal: the padding table drawn with rich, the fastest valid row highlighted and rows
whose figure should not be trusted (invalid, failed, noisy, contended) dimmed.

The cells are the plain table's own (`padding.table_rows`), so both views always agree; only the
drawing differs. When the output is not a terminal (a pipe, a file, CI logs) the plain text table is
written instead, so scripts that read it see exactly what they always did.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from padbench.contract.padding import PaddingResult
from padbench.contract.results import JobResultBase
from padbench.report import padding
from padbench.report.columns import PLAIN_WIDTH
from padbench.report.experts import load_lines
from padbench.report.kind import report_for
from padbench.report.verdict import curve_lines, is_doubtful, ranked_rows, verdict_lines, winner

WINNER_STYLE = "bold green"
UNTRUSTED_STYLE = "dim"


def padding_table(result: PaddingResult) -> Table:
    cells, _ = padding.table_rows(result)
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for column in padding.COLUMNS:
        table.add_column(column, justify="right" if column in padding.RIGHT_ALIGNED else "left", no_wrap=True)
    best = winner(result)
    for row, values in zip(ranked_rows(result.strategies), cells, strict=True):  # table_rows ranks them too
        style = WINNER_STYLE if row is best else UNTRUSTED_STYLE if is_doubtful(row) else None
        table.add_row(*values, style=style)
    return table


def print_rich(result: JobResultBase, console: Console) -> None:
    """The kind's own terminal table where it has one, its plain table otherwise."""
    entry = report_for(result)
    if entry.print_rich is None:
        console.print(Text(entry.render_table(result)), end="")
    else:
        entry.print_rich(result, console)


def print_padding(result: PaddingResult, console: Console) -> None:
    _, notes = padding.table_rows(result)
    for line in padding.header_lines(result):
        console.print(Text(line))
    console.print()
    console.print(padding_table(result))
    if notes:
        console.print()
        for number, note in enumerate(notes, start=1):
            console.print(Text(f"[{number}] {note}", style=UNTRUSTED_STYLE))
    console.print()
    for number, line in enumerate(verdict_lines(result)):
        console.print(Text(line, style=WINNER_STYLE if number == 0 and winner(result) else ""))
    curve = curve_lines(result)
    if curve:
        console.print(Text("\nbatch-size curves (tokens/s):"))
        for line in curve:
            console.print(Text(f"  {line}"))
    load = load_lines(result)  # a mixture of experts: how the routers spread the work, padding's share of it
    if load:
        console.print()
        for line in load:
            console.print(Text(line))


def console_for(stream: TextIO) -> Console:
    """A rich console on `stream`: a terminal's as it is; for a pipe or a file one that is not a terminal
    (whatever FORCE_COLOR says, as `stream.isatty()` decides for every table padbench prints), so what is
    drawn on it is plain text — no colour, no box drawing — and no line is cut at 80 columns."""
    if stream.isatty():
        return Console(file=stream, highlight=False)
    return Console(file=stream, highlight=False, force_terminal=False, width=PLAIN_WIDTH)


def write_table(result: JobResultBase, stream: TextIO) -> None:
    """The results table on `stream`: drawn with rich on a terminal, the plain text table otherwise."""
    if stream.isatty():
        print_rich(result, Console(file=stream))
    else:
        stream.write(report_for(result).render_table(result))
