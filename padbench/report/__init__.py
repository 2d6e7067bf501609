"""Rendering stored results for people (tables) and tools (JSON, CSV). Used by `padbench run` and the client.

Each job kind's report (tables, CSV rows, identity, comparison rule, verdict) is part of its record
(`padbench/kinds/<kind>/`); everything here renders any kind through it, and the modules beside this one
hold what every kind's report shares.
"""

from __future__ import annotations

import csv
import io

from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_spec
from padbench.report.identity import identity
from padbench.report.ranking import RankBy, ranked_table
from padbench.report.record import render_record
from padbench.report.table import plain_text


def render_table(result: JobResultBase, rank_by: RankBy = "speed") -> str:
    """The plain text table, its verdict ranked by speed or by cost (`padbench.report.ranking`)."""
    entry = kind_spec(result.kind).report
    if rank_by != "speed" and entry.table is not None:
        return plain_text(ranked_table(entry.table(result), result, rank_by))
    return entry.render_table(result)


def render_json(result: JobResultBase) -> str:
    return JOB_RESULT_ADAPTER.dump_json(result, indent=2).decode()


def render_csv(result: JobResultBase, job_id: int | None = None) -> str:
    """One row per strategy (or attention cell), led by the job's identity columns (job id, model, GPU,
    dtype, mode, date), so the CSVs of several jobs concatenate into one table."""
    rows = [{**identity(result, job_id), **row} for row in kind_spec(result.kind).report.csv_rows(result)]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def render(result: JobResultBase, fmt: str, job_id: int | None = None, rank_by: RankBy = "speed") -> str:
    if fmt == "csv":
        return render_csv(result, job_id)
    if fmt == "record":
        return render_record(result, job_id)
    if fmt == "table":
        return render_table(result, rank_by)
    if fmt != "json":
        raise ValueError(f"unknown format {fmt!r} (choose table, json, csv or record)")
    return render_json(result)


__all__ = ["render", "render_csv", "render_json", "render_table"]
