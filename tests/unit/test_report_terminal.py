"""The rich results table: same cells as the plain one, the fastest valid row highlighted, untrusted rows
dimmed; a stream that is not a terminal gets the plain table unchanged."""

from __future__ import annotations

import io

from rich.console import Console

from padbench.kinds.padding.report import render_table, result_table
from padbench.kinds.padding.verdict import ranked_rows, winner
from padbench.report.table import UNTRUSTED_STYLE, WINNER_STYLE, plain_text, rich_table
from padbench.report.terminal import print_rich, write_table
from tests.unit.test_report_padding import sample_result


def test_rows_are_styled_by_trust_in_the_tables_ranked_order() -> None:
    result = sample_result()
    table = rich_table(result_table(result))
    best = winner(result)
    assert best is not None and best.label == "packed"
    expected = [WINNER_STYLE if row is best else UNTRUSTED_STYLE if row.status != "ok" else None
                for row in ranked_rows(result.strategies)]
    assert [row.style for row in table.rows] == expected
    assert table.rows[0].style == WINNER_STYLE  # fastest first


def test_rich_output_carries_the_plain_tables_figures_and_the_winner() -> None:
    console = Console(file=io.StringIO(), width=220)
    print_rich(sample_result(), console)
    text = console.file.getvalue()
    assert "1,062,000" in text and "verdict:" in text and "packed" in text
    assert "[1] measured 3 batches" in text


def test_a_pipe_gets_the_plain_table() -> None:
    stream = io.StringIO()
    write_table(sample_result(), stream)
    assert stream.getvalue() == render_table(sample_result())


def test_names_from_specs_and_workers_are_printed_literally_in_both_views() -> None:
    """A model or kernel name carrying a terminal's control sequences or rich markup reads as text."""
    hostile = "tiny\x1b]0;owned\x07[link=https://example.invalid]x[/link]\x1b[2J"
    result = sample_result()
    rows = [row.model_copy(update={"kernel": hostile}) for row in result.strategies]
    result = result.model_copy(update={"strategies": rows})
    plain = plain_text(result_table(result))
    assert "\x1b" not in plain and "\\x1b]0;owned\\x07[link=https://example.invalid]x[/link]" in plain
    console = Console(file=io.StringIO(), width=400, force_terminal=True)
    print_rich(result, console)
    drawn = console.file.getvalue()
    # Rich styles the rows with its own SGR sequences; none of the name's reach the terminal, nor a link.
    assert "\x1b]0;" not in drawn and "\x1b[2J" not in drawn and "\x1b]8;" not in drawn
    assert "[link=https://example.invalid]" in drawn
