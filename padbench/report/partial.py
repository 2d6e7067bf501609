"""The line that marks a result as partial: the rows a cancelled job finished before the cancel stopped it."""

from __future__ import annotations

from padbench.contract.results import AttentionResult, PaddingResult


def partial_lines(result: PaddingResult | AttentionResult) -> list[str]:
    """One line for a partial result (nothing for a whole one), to lead its table."""
    kept = result.partial
    if kept is None:
        return []
    rows = "strategy rows" if isinstance(result, PaddingResult) else "cells"
    return [f"PARTIAL RESULT: the job was cancelled after {kept.rows_finished} of {kept.rows_planned} {rows}; "
            "only those are listed, the others were never measured"]
