"""Finished results waiting to be reported, kept on disk so a server outage or a worker restart loses none.

A result is written here before the first attempt to report it and removed once the server has answered
for good (stored, or refused because the lease is gone). Each names the route it is reported through: a
job's lease (`/leases`), or a gang membership (`/gangs`: the result of a job across several workers, from
the member whose node ran global rank 0). A file written before routes were recorded names none, and was a
lease's. The directory is private to the worker's user
(0700, files 0600): a result names the data and model paths of someone's job. Files are written to a
temporary name and renamed, so a worker killed mid-write leaves no half document behind.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

log = logging.getLogger("padbench.worker")
PRIVATE_DIRECTORY = 0o700
PRIVATE_FILE = 0o600


class ReportRoute(str, Enum):
    """Where a result is reported, and so what its token is."""

    LEASE = "lease"  # `/leases/{job}/complete`, under the job's lease token
    GANG = "gang"  # `/gangs/{job}/complete`, under the reporting member's token


@dataclass(frozen=True)
class PendingResult:
    job_id: int
    token: str  # the lease token, or the member token on the gang route
    result: dict[str, Any]
    route: ReportRoute = ReportRoute.LEASE


def outbox_directory(base: Path, worker_name: str) -> Path:
    """One directory per worker name: several workers on one box may share the cache directory."""
    return base / "outbox" / re.sub(r"[^A-Za-z0-9._-]", "_", worker_name)


class Outbox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, job_id: int) -> Path:
        return self.directory / f"job-{job_id}.json"

    def save(self, pending: PendingResult) -> None:
        self.directory.mkdir(mode=PRIVATE_DIRECTORY, parents=True, exist_ok=True)
        self.directory.chmod(PRIVATE_DIRECTORY)
        temporary = self.directory / f".job-{pending.job_id}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump({"job_id": pending.job_id, "token": pending.token, "route": pending.route.value,
                       "result": pending.result}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self._path(pending.job_id))

    def remove(self, job_id: int) -> None:
        self._path(job_id).unlink(missing_ok=True)

    def pending(self) -> list[PendingResult]:
        """Every saved result, oldest job first; unreadable files are logged and set aside, not fatal."""
        found = []
        for path in sorted(self.directory.glob("job-*.json")):
            try:
                found.append(_pending(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError, TypeError) as error:
                log.error("outbox: %s cannot be read (%s); moved aside", path.name, type(error).__name__)
                path.replace(path.with_suffix(".unreadable"))
        return found


def _pending(document: dict[str, Any]) -> PendingResult:
    """A saved document as a pending result; one saved before routes were recorded names its lease token as
    `lease_token` and no route."""
    token = document["token"] if "token" in document else document["lease_token"]
    route = ReportRoute(document.get("route", ReportRoute.LEASE.value))
    return PendingResult(int(document["job_id"]), str(token), document["result"], route)
