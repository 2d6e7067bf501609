"""A kind's `ResultTable` rendered for people: plain text for pipes, files and CI logs, and drawn with rich on a
terminal (the row the verdict names highlighted, rows not to rank by dimmed). Both read the same model, and
the dashboard renders it too (`common.js`), so every view shows the same cells.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from padbench.contract.table import ResultTable
from padbench.report.columns import align
from padbench.terminal_text import literal

WINNER_STYLE = "bold green"
UNTRUSTED_STYLE = "dim"
STYLES = {"winner": WINNER_STYLE, "doubtful": UNTRUSTED_STYLE, None: None}


def numbered(notes: list[str]) -> list[str]:
    return [f"[{number}] {note}" for number, note in enumerate(notes, start=1)]


def plain_text(table: ResultTable) -> str:
    """The header lines, the aligned table, the numbered notes, the verdict and what follows it. Names in them
    come from specs and workers, so every control character is written as an escape (`literal`)."""
    right = {column.name for column in table.columns if column.right}
    cells = [[literal(cell) for cell in row.cells] for row in table.rows]
    grid = align([[column.name for column in table.columns], *cells], right)
    lines = [*map(literal, table.header), "", *grid]
    if table.notes:
        lines += ["", *map(literal, numbered(table.notes))]
    lines += ["", *map(literal, table.verdict)]
    if table.after:
        lines += ["", *map(literal, table.after)]
    return "\n".join(lines) + "\n"


def rich_table(table: ResultTable) -> Table:
    drawn = Table(show_edge=False, header_style="bold", pad_edge=False)
    for column in table.columns:
        drawn.add_column(Text(column.name), justify="right" if column.right else "left", no_wrap=True)
    for row in table.rows:
        drawn.add_row(*(Text(literal(cell)) for cell in row.cells), style=STYLES[row.mark])
    return drawn


def print_table(table: ResultTable, console: Console) -> None:
    """The same parts as `plain_text`, the grid drawn by rich; every string is printed as text, never markup."""
    for line in table.header:
        console.print(Text(literal(line)))
    console.print()
    console.print(rich_table(table))
    if table.notes:
        console.print()
        for line in numbered(table.notes):
            console.print(Text(literal(line), style=UNTRUSTED_STYLE))
    console.print()
    named = any(row.mark == "winner" for row in table.rows)
    for number, line in enumerate(table.verdict):
        console.print(Text(literal(line), style=WINNER_STYLE if number == 0 and named else ""))
    if table.after:
        console.print()
        for line in table.after:
            console.print(Text(literal(line)))
