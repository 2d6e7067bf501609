"""Views for the client CLI: one job's status, a page of jobs and the workers, as tables (plain text, or drawn
with rich on a terminal).

Every cell is passed through `literal`, since names, errors and labels are written by submitters and
workers: a control character shows as its escape instead of acting on the reader's terminal. Rich tables get
the cells as `Text`, which rich never parses as markup, so a `[link=…]` in a name is shown, not drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.table import Table
from rich.text import Text

from padbench.contract.api import JobOut, JobPage, JobStatus, JobSummary, WorkerOut
from padbench.report.columns import align
from padbench.terminal_text import literal

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
    gpu = job.spec.get("gpu")
    if job.status is JobStatus.queued and gpu:
        # The server leases such a job only to a worker with that GPU: say why it may wait while others run.
        lines.append(("needs", f"a worker whose GPU name contains {gpu!r}"))
    labels = job.spec.get("worker_labels")
    if job.status is JobStatus.queued and labels:  # likewise, only a worker carrying every label takes it
        lines.append(("needs", "a worker labelled " + ", ".join(labels)))
    if job.waiting_reason:  # the server found no live worker that could ever take it
        lines.append(("waits", job.waiting_reason))
    if job.error:
        lines.append(("error", job.error))
    for flag in job.regressions:  # the check of its result against each baseline it matched
        lines.append(("REGRESSED" if flag.regressed else "baseline", flag.summary))
    return "\n".join(f"{label:<10} {literal(value)}" for label, value in lines)


LIST_COLUMNS = ("ID", "STATUS", "KIND", "NAME", "PROGRESS", "WORKER", "CREATED")


def _literal_cells(*cells: str) -> tuple[str, ...]:
    return tuple(literal(cell) for cell in cells)


def _rich_cells(cells: tuple[str, ...]) -> list[Text]:
    """Cells as rich `Text`: shown as written, where a plain string would be parsed as markup."""
    return [Text(cell) for cell in cells]


def _list_row(job: JobSummary) -> tuple[str, ...]:
    return _literal_cells(str(job.id), job.status.value, job.kind, job.name or "-", _progress(job),
                          job.worker or "-", _when(job.created_at))


def _shown(page: JobPage) -> str:
    shown_to = page.offset + len(page.items)
    return f"({len(page.items)} shown, {page.offset + 1 if page.items else 0}-{shown_to} of {page.total})"


def page_table(page: JobPage) -> Table:
    table = Table(*LIST_COLUMNS, show_edge=False, header_style="bold", pad_edge=False, caption=_shown(page))
    for job in page.items:
        table.add_row(*_rich_cells(_list_row(job)), style=STATUS_STYLES.get(job.status.value) or None)
    return table


def format_page(page: JobPage) -> str:
    return "\n".join([*_plain_rows(LIST_COLUMNS, [_list_row(job) for job in page.items]), _shown(page)])


def _plain_rows(columns: Sequence[str], rows: list[tuple[str, ...]]) -> list[str]:
    """Columns aligned with spaces: for pipes and files, where rich's box drawing would be noise."""
    return align([tuple(columns), *rows])


WORKER_COLUMNS = ("NAME", "DEVICE", "GPU", "GPUS BUSY", "LABELS", "LAST CONTACT", "RUNNING JOBS")
AGE_UNITS = (("d", 86_400), ("h", 3600), ("min", 60))


def format_age(moment: datetime | None, now: datetime) -> str:
    """How long ago `moment` was, in its largest whole unit: `3 s ago`, `12 min ago`, `2 d ago`."""
    if moment is None:
        return "never"
    seconds = max(0, int((now - moment).total_seconds()))  # clocks a little apart never give "-2 s ago"
    for unit, length in AGE_UNITS:
        if seconds >= length:
            return f"{seconds // length} {unit} ago"
    return f"{seconds} s ago"


def _gpu_model(name: str, memory_bytes: int | None) -> str:
    return name if memory_bytes is None else f"{name} ({memory_bytes / 2**30:.0f} GiB)"


def _gpu(worker: WorkerOut) -> str:
    """The worker's GPUs: `NVIDIA H100 80GB HBM3 (79 GiB)`, `4 × …` for four alike, each listed when they differ."""
    capabilities = worker.capabilities
    if not capabilities.gpus:  # one GPU or none, as workers registered before they listed their GPUs
        return "-" if capabilities.gpu_name is None else _gpu_model(capabilities.gpu_name,
                                                                   capabilities.gpu_memory_bytes)
    models = [_gpu_model(gpu.name, gpu.memory_bytes) for gpu in capabilities.gpus]
    if len(set(models)) == 1:
        return models[0] if len(models) == 1 else f"{len(models)} × {models[0]}"
    return "; ".join(f"{gpu.index}: {model}" for gpu, model in zip(capabilities.gpus, models, strict=True))


def _busy(worker: WorkerOut) -> str:
    owned = worker.capabilities.owned_gpus
    return "-" if worker.gpus_busy is None or owned == 0 else f"{worker.gpus_busy} of {owned}"


def _running(worker: WorkerOut) -> str:
    ids = worker.running_job_ids or ([worker.running_job_id] if worker.running_job_id is not None else [])
    return ", ".join(str(job_id) for job_id in ids) or "-"


def _worker_row(worker: WorkerOut, now: datetime) -> tuple[str, ...]:
    return _literal_cells(worker.name, worker.capabilities.device, _gpu(worker), _busy(worker),
                          ", ".join(worker.capabilities.labels) or "-", format_age(worker.last_contact_at, now),
                          _running(worker))


def workers_table(workers: list[WorkerOut], now: datetime) -> Table:
    table = Table(*WORKER_COLUMNS, show_edge=False, header_style="bold", pad_edge=False,
                  caption=f"({len(workers)} registered)")
    for worker in workers:
        table.add_row(*_rich_cells(_worker_row(worker, now)),
                      style="yellow" if worker.running_job_id is not None else None)
    return table


def format_workers(workers: list[WorkerOut], now: datetime) -> str:
    rows = _plain_rows(WORKER_COLUMNS, [_worker_row(worker, now) for worker in workers])
    return "\n".join([*rows, f"({len(workers)} registered)"])
