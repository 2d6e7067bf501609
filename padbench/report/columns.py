"""Plain-text tables: columns laid out by rich, the same library that draws them on a terminal, without colour
or box drawing, for pipes, files and CI logs."""

from __future__ import annotations

import io
from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

# Wide enough for any table padbench prints: a pipe has no width, and rich would otherwise cut at 80 columns.
PLAIN_WIDTH = 10_000


def align(rows: Sequence[Sequence[str]], right_aligned: Collection[str] = ()) -> list[str]:
    """Columns padded to their widest cell and two spaces apart; `rows[0]` is the header, whose names pick the
    right-aligned columns. Cells are text as written (no rich markup), lines carry no trailing spaces."""
    header, *body = rows
    table = Table(box=None, pad_edge=False, show_edge=False, header_style=None)
    for name in header:
        table.add_column(Text(name), justify="right" if name in right_aligned else "left", no_wrap=True)
    for row in body:
        table.add_row(*(Text(cell) for cell in row))
    written = io.StringIO()
    Console(file=written, width=PLAIN_WIDTH, force_terminal=False, color_system=None).print(table)
    return [line.rstrip() for line in written.getvalue().splitlines()]
