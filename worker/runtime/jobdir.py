"""A job's directory: how a worker and the processes a cluster's scheduler starts for it talk through files.

A worker that hands its job to a scheduler (`padbench worker --slurm`) cannot hold a pipe to the job's
processes: they start later, on another host. It writes what to run into a directory on a file system both
hosts see (`run.json`), and `padbench-rank` — the command each node runs — writes back what the local child's
pipe would have carried: the latest progress (`progress.json`), the latest partial result (`partial.json`)
and how each node's share of the run ended (`report-NODE.json`, a `ChildReport`). Each file is replaced whole
(written aside, then renamed), so a reader on the worker's host never sees half of one.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from padbench.worker.runtime.isolation import ChildReport

RUN_FILE = "run.json"
PROGRESS_FILE = "progress.json"
PARTIAL_FILE = "partial.json"
REPORT_FILE = "report-{node}.json"  # one per node: on several, the one holding global rank 0 has the value
WORK_FOLDER = "work"  # the job's working directory: empty and private, as a local job's temporary one


@dataclass(frozen=True)
class RunOrder:
    """What `padbench-rank` runs: the target and the spec as JSON text, and the limits of a local run."""

    target: str
    spec_text: str
    ranks_per_node: int
    nodes: int = 1
    timeout_s: float | None = None
    memory_cap_bytes: int | None = None
    worker: str = ""  # the name of the worker that submitted it, which the result's nodes carry


def write_whole(path: Path, document: Any) -> None:
    """Replace `path` with `document` as JSON, all at once for any reader."""
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(json.dumps(document), encoding="utf-8")
    os.replace(aside, path)


def read_json(path: Path) -> Any | None:
    """The file's document; None when it is not there (yet) or not whole JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class JobDirectory:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def workdir(self) -> Path:
        return self.path / WORK_FOLDER

    def create(self, order: RunOrder) -> None:
        # Private, as a local job's files: the spec may name private data.
        self.path.mkdir(mode=0o700, parents=True, exist_ok=False)
        self.workdir.mkdir(mode=0o700)
        write_whole(self.path / RUN_FILE, dataclasses.asdict(order))

    def order(self) -> RunOrder:
        document = read_json(self.path / RUN_FILE)
        if not isinstance(document, dict):
            raise FileNotFoundError(f"{self.path / RUN_FILE}: no run order (is the directory shared with this host?)")
        return RunOrder(**document)

    def write_progress(self, fraction: float, message: str) -> None:
        write_whole(self.path / PROGRESS_FILE, [fraction, message])

    def progress(self) -> tuple[float, str] | None:
        document = read_json(self.path / PROGRESS_FILE)
        return (float(document[0]), str(document[1])) if isinstance(document, list) and len(document) == 2 else None

    def write_partial(self, document: Any) -> None:
        write_whole(self.path / PARTIAL_FILE, document)

    def partial(self) -> Any | None:
        return read_json(self.path / PARTIAL_FILE)

    def write_report(self, report: ChildReport, node: int) -> None:
        write_whole(self.path / REPORT_FILE.format(node=node), dataclasses.asdict(report))

    def reports(self, nodes: int) -> list[ChildReport]:
        """The reports the job's nodes wrote, in node order (a node killed before it wrote one has none)."""
        documents = [read_json(self.path / REPORT_FILE.format(node=node)) for node in range(nodes)]
        return [ChildReport(**document) for document in documents if isinstance(document, dict)]


def job_report(reports: list[ChildReport], nodes: int) -> ChildReport | None:
    """How the whole job ended from its nodes' reports: the first node's failure, else the report carrying the
    result (torch places global rank 0 on any node); None while a node's report is missing and none failed."""
    failed = [report for report in reports if report.outcome != "ok"]
    if failed:
        return failed[0]
    if len(reports) < nodes:
        return None
    return next((report for report in reports if report.value is not None), reports[0] if reports else None)
