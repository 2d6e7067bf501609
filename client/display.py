"""Views of jobs for the client CLI: one job's status, and a page of jobs as a table (plain text, or drawn
with rich on a terminal)."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table

from padbench.contract.api import JobOut, JobPage, JobSummary

STATUS_STYLES = {"succeeded": "green", "failed": "red", "running": "yellow", "cancelled": "dim", "queued": ""}


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _progress(job: JobSummary) -> str:
    return f"{job.progress * 100:.0f}%" if job.progress is not None else "-"


def format_status(job: JobOut) -> str:
    lines = [
        ("job", str(job.id)),
        ("name", job.name or "-"),
        ("kind", job.kind),
        ("status", job.status.value + (" (cancel requested)" if job.cancel_requested and not job.status.is_final
                                       else "")),
        ("progress", _progress(job) + (f"  {job.progress_message}" if job.progress_message else "")),
        ("attempts", f"{job.attempts} of {job.max_attempts}"),
        ("worker", job.worker or "-"),
        ("submitter", job.submitter),
        ("created", _when(job.created_at)),
        ("started", _when(job.started_at)),
        ("finished", _when(job.finished_at)),
    ]
    if job.error:
        lines.append(("error", job.error))
    return "\n".join(f"{label:<10} {value}" for label, value in lines)


LIST_COLUMNS = ("ID", "STATUS", "KIND", "NAME", "PROGRESS", "WORKER", "CREATED")


def _list_row(job: JobSummary) -> tuple[str, ...]:
    return (str(job.id), job.status.value, job.kind, job.name or "-", _progress(job), job.worker or "-",
            _when(job.created_at))


def _shown(page: JobPage) -> str:
    shown_to = page.offset + len(page.items)
    return f"({len(page.items)} shown, {page.offset + 1 if page.items else 0}-{shown_to} of {page.total})"


def page_table(page: JobPage) -> Table:
    table = Table(*LIST_COLUMNS, show_edge=False, header_style="bold", pad_edge=False, caption=_shown(page))
    for job in page.items:
        table.add_row(*_list_row(job), style=STATUS_STYLES.get(job.status.value) or None)
    return table


def format_page(page: JobPage) -> str:
    rows = [LIST_COLUMNS] + [_list_row(job) for job in page.items]
    widths = [max(len(row[column]) for row in rows) for column in range(len(LIST_COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append(_shown(page))
    return "\n".join(lines)
