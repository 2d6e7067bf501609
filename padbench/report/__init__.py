"""Rendering stored results for people (tables) and tools (JSON, CSV). Used by `padbench run` and the client.

Each job kind has its own module (`padding`, `attention`, `generate`) and one entry in REPORTS (`report.kind`),
registered here: its tables, CSV rows, identity and comparison rule. Everything below renders any kind
through its entry.
"""

from __future__ import annotations

import csv
import io

from padbench.contract.attention_sweep import AttentionResult
from padbench.contract.generate import GenerateResult
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.padding import PaddingResult
from padbench.contract.results import JobResultBase
from padbench.report import attention, generate, generate_verdict, padding, terminal, verdict
from padbench.report.identity import identity
from padbench.report.kind import REPORTS, KindReport, report_for

REPORTS.add("padding", KindReport[PaddingResult](
    noun="a padding job", plural="padding jobs", render_table=padding.render_table, csv_rows=padding.csv_rows,
    run_facts=padding.run_facts, compare=padding.COMPARE, print_rich=terminal.print_padding,
    verdict=verdict.padding_verdict))
REPORTS.add("attention", KindReport[AttentionResult](
    noun="an attention sweep", plural="attention sweeps", render_table=attention.render_table,
    csv_rows=attention.csv_rows, run_facts=attention.run_facts, compare=attention.COMPARE))
REPORTS.add("generate", KindReport[GenerateResult](
    noun="a generate job", plural="generate jobs", render_table=generate.render_table, csv_rows=generate.csv_rows,
    run_facts=generate.run_facts, compare=generate.COMPARE, verdict=generate_verdict.generate_verdict))


def render_table(result: JobResultBase) -> str:
    return report_for(result).render_table(result)


def render_json(result: JobResultBase) -> str:
    return JOB_RESULT_ADAPTER.dump_json(result, indent=2).decode()


def render_csv(result: JobResultBase, job_id: int | None = None) -> str:
    """One row per strategy (or attention cell), led by the job's identity columns (job id, model, GPU,
    dtype, mode, date), so the CSVs of several jobs concatenate into one table."""
    rows = [{**identity(result, job_id), **row} for row in report_for(result).csv_rows(result)]
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def render(result: JobResultBase, fmt: str, job_id: int | None = None) -> str:
    if fmt == "csv":
        return render_csv(result, job_id)
    renderers = {"table": render_table, "json": render_json}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r} (choose table, json or csv)")
    return renderers[fmt](result)


__all__ = ["render", "render_csv", "render_json", "render_table"]
