"""The rich results table: same cells as the plain one, the fastest valid row highlighted, untrusted rows
dimmed; a stream that is not a terminal gets the plain table unchanged."""

from __future__ import annotations

import io

from rich.console import Console

from padbench.report.padding import render_table
from padbench.report.terminal import UNTRUSTED_STYLE, WINNER_STYLE, padding_table, print_rich, winner_index, write_table
from tests.unit.test_report_padding import sample_result


def test_the_winner_is_the_fastest_valid_row() -> None:
    result = sample_result()
    assert winner_index(result.strategies) == 2  # packed on torch-flash-varlen
    noisy = result.strategies[2].model_copy(update={"status": "invalid", "tokens_per_s": None})
    assert winner_index([result.strategies[0], noisy]) == 0


def test_rows_are_styled_by_trust() -> None:
    table = padding_table(sample_result())
    assert [row.style for row in table.rows] == [None, UNTRUSTED_STYLE, WINNER_STYLE, UNTRUSTED_STYLE]


def test_rich_output_carries_the_plain_tables_figures_and_the_winner() -> None:
    console = Console(file=io.StringIO(), width=220)
    print_rich(sample_result(), console)
    text = console.file.getvalue()
    assert "1,062,000" in text and "fastest valid layout: packed on torch-flash-varlen" in text
    assert "[1] measured 3 batches" in text


def test_a_pipe_gets_the_plain_table() -> None:
    stream = io.StringIO()
    write_table(sample_result(), stream)
    assert stream.getvalue() == render_table(sample_result())
