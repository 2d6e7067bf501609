"""Rendering stored results for people (tables) and tools (JSON, CSV). Used by `padbench run` and the client.

Each job kind has its own module with `render_table(result) -> str` and `csv_rows(result) -> list[dict]`.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from padbench.contract.results import JOB_RESULT_ADAPTER, AttentionResult, PaddingResult
from padbench.report import attention, padding
from padbench.report.identity import identity


def render_table(result: PaddingResult | AttentionResult) -> str:
    if isinstance(result, PaddingResult):
        return padding.render_table(result)
    return attention.render_table(result)


def _csv_rows(result: PaddingResult | AttentionResult) -> list[dict[str, Any]]:
    if isinstance(result, PaddingResult):
        return padding.csv_rows(result)
    return attention.csv_rows(result)


def render_json(result: PaddingResult | AttentionResult) -> str:
    return JOB_RESULT_ADAPTER.dump_json(result, indent=2).decode()


def render_csv(result: PaddingResult | AttentionResult, job_id: int | None = None) -> str:
    """One row per strategy (or attention cell), led by the job's identity columns (job id, model, GPU,
    dtype, mode, date), so the CSVs of several jobs concatenate into one table."""
    rows = [{**identity(result, job_id), **row} for row in _csv_rows(result)]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def render(result: PaddingResult | AttentionResult, fmt: str, job_id: int | None = None) -> str:
    if fmt == "csv":
        return render_csv(result, job_id)
    renderers = {"table": render_table, "json": render_json}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r} (choose table, json or csv)")
    return renderers[fmt](result)


__all__ = ["render", "render_csv", "render_json", "render_table"]
