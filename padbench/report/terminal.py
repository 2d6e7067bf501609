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

from padbench.contract.results import AttentionResult, PaddingResult, StrategyResult
from padbench.report import padding, render_table

WINNER_STYLE = "bold green"
UNTRUSTED_STYLE = "dim"
# Marks a row can carry besides its status; any that is true makes its figure one not to rank by.
DOUBT_FLAGS = ("noisy", "contended")


def winner_index(strategies: list[StrategyResult]) -> int | None:
    """The row with the most tokens/s among valid rows; None when no row has a valid figure."""
    ranked = [(row.tokens_per_s, index) for index, row in enumerate(strategies)
              if row.status == "ok" and row.tokens_per_s is not None and not is_doubtful(row)]
    return max(ranked)[1] if ranked else None


def is_doubtful(row: StrategyResult) -> bool:
    """Invalid or failed, or marked noisy or contended (as a flag of that name or in a list of marks)."""
    marks = getattr(row, "marks", None) or ()
    return row.status != "ok" or any(bool(getattr(row, flag, False)) or flag in marks for flag in DOUBT_FLAGS)


def padding_table(result: PaddingResult) -> Table:
    cells, _ = padding.table_rows(result)
    table = Table(show_edge=False, header_style="bold", pad_edge=False)
    for column in padding.COLUMNS:
        table.add_column(column, justify="right" if column in padding.RIGHT_ALIGNED else "left", no_wrap=True)
    winner = winner_index(result.strategies)
    for index, (row, values) in enumerate(zip(result.strategies, cells, strict=True)):
        style = WINNER_STYLE if index == winner else UNTRUSTED_STYLE if is_doubtful(row) else None
        table.add_row(*values, style=style)
    return table


def print_rich(result: PaddingResult | AttentionResult, console: Console) -> None:
    if isinstance(result, AttentionResult):
        console.print(Text(render_table(result)), end="")
        return
    _, notes = padding.table_rows(result)
    for line in padding.header_lines(result):
        console.print(Text(line))
    console.print()
    console.print(padding_table(result))
    winner = winner_index(result.strategies)
    if winner is not None:
        console.print(Text(f"fastest valid layout: {result.strategies[winner].label} on "
                           f"{result.strategies[winner].kernel}", style=WINNER_STYLE))
    if notes:
        console.print()
        for number, note in enumerate(notes, start=1):
            console.print(Text(f"[{number}] {note}", style=UNTRUSTED_STYLE))


def write_table(result: PaddingResult | AttentionResult, stream: TextIO) -> None:
    """The results table on `stream`: drawn with rich on a terminal, the plain text table otherwise."""
    if stream.isatty():
        print_rich(result, Console(file=stream))
    else:
        stream.write(render_table(result))
