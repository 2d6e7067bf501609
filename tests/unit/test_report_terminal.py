"""The rich results table: same cells as the plain one, the fastest valid row highlighted, untrusted rows
dimmed; a stream that is not a terminal gets the plain table unchanged."""

from __future__ import annotations

import io

from rich.console import Console

from padbench.report.padding import render_table
from padbench.report.terminal import UNTRUSTED_STYLE, WINNER_STYLE, padding_table, print_rich, write_table
from padbench.report.verdict import ranked_rows, winner
from tests.unit.test_report_padding import sample_result


def test_rows_are_styled_by_trust_in_the_tables_ranked_order() -> None:
    result = sample_result()
    table = padding_table(result)
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
