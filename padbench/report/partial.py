"""The line that marks a result as partial: the rows a job finished before a cancel or a time limit stopped it."""

from __future__ import annotations

from padbench.contract.results import PartialResult


def partial_lines(kept: PartialResult | None, rows: str) -> list[str]:
    """One line for a partial result (nothing for a whole one), to lead its table; `rows` names what the kind
    counts ("strategy rows", "cells")."""
    if kept is None:
        return []
    stopped = "was cancelled" if kept.reason == "cancelled" else "ran out of its time limit"
    return [f"PARTIAL RESULT: the job {stopped} after {kept.rows_finished} of {kept.rows_planned} {rows}; "
            "only those are listed, the others were never measured"]
