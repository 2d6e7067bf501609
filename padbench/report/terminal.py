"""Results on a terminal: a kind's table model drawn with rich where its report has one (`KindReport.table`), its
plain table otherwise. When the output is not a terminal (a pipe, a file, CI logs) the plain text table is written
instead, so scripts that read it see exactly what they always did.
"""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.text import Text

from padbench.contract.results import JobResultBase
from padbench.report.columns import PLAIN_WIDTH
from padbench.report.ranking import RankBy, ranked_table
from padbench.report.table import plain_text, print_table


def print_rich(result: JobResultBase, console: Console) -> None:
    """The kind's own terminal table where it has one, its plain table otherwise."""
    from padbench.kinds.record import kind_spec  # the records import this module's helpers

    entry = kind_spec(result.kind).report
    if entry.table is None:
        console.print(Text(entry.render_table(result)), end="")
    else:
        print_table(entry.table(result), console)


def console_for(stream: TextIO) -> Console:
    """A rich console on `stream`: a terminal's as it is; for a pipe or a file one that is not a terminal
    (whatever FORCE_COLOR says, as `stream.isatty()` decides for every table padbench prints), so what is
    drawn on it is plain text — no colour, no box drawing — and no line is cut at 80 columns."""
    if stream.isatty():
        return Console(file=stream, highlight=False)
    return Console(file=stream, highlight=False, force_terminal=False, width=PLAIN_WIDTH)


def write_table(result: JobResultBase, stream: TextIO, rank_by: RankBy = "speed") -> None:
    """The results table on `stream`: drawn with rich on a terminal, the plain text table otherwise; its verdict
    ranked by speed or by cost (`padbench.report.ranking`)."""
    from padbench.kinds.record import kind_spec

    entry = kind_spec(result.kind).report
    if rank_by != "speed" and entry.table is not None:
        table = ranked_table(entry.table(result), result, rank_by)
        if stream.isatty():
            print_table(table, Console(file=stream))
        else:
            stream.write(plain_text(table))
    elif stream.isatty():
        print_rich(result, Console(file=stream))
    else:
        stream.write(entry.render_table(result))
