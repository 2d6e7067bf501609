"""The line that marks a result as partial: the rows a job finished before a cancel, a time limit or a failure
stopped it."""

from __future__ import annotations

from padbench.contract.results import PartialResult

# How the line says the job stopped, for each `PartialResult.reason`.
STOPPED = {"cancelled": "was cancelled", "timed_out": "ran out of its time limit", "failed": "failed",
           "running": "had not finished when this was written (a run stopped outright leaves it so)"}


def partial_lines(kept: PartialResult | None, rows: str) -> list[str]:
    """One line for a partial result (nothing for a whole one), to lead its table; `rows` names what the kind
    counts ("strategy rows", "cells")."""
    if kept is None:
        return []
    stopped = STOPPED[kept.reason]
    line = (f"PARTIAL RESULT: the job {stopped} after {kept.rows_finished} of {kept.rows_planned} {rows}; "
            "only those are listed, the others were never measured")
    if kept.last_row_measured_only:
        line += "; the last one stopped after its measurement, before its step split and collectives profile"
    return [line]
