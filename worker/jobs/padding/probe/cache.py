"""The probe cache: a confirmed limit is reused by any later job on the same device, software and model.

One JSON file in the user cache directory, keyed by a digest of everything that changes memory use:
GPU model, total memory, driver, torch / transformers / kernel-library versions, model config, dtype,
strategy, kernel, max_length, mode, compile and training's loss. The margin and cap are *not* in the key:
the cache keeps the confirmed limit, and each job applies its own margin and cap to it. Several workers may share the
file, so writes are serialised with a lock and land by atomic rename; an unreadable file is treated as
empty (it only ever holds re-measurable figures).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from padbench.contract.results import ProbeAttempt
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.runtime.state_files import locked, replace_json

CACHE_FILE_NAME = "probe-cache.json"


@dataclass(frozen=True)
class ProbeKey:
    device_name: str
    total_memory_bytes: int | None
    driver: str | None
    torch: str
    transformers: str | None
    kernel_library: str | None  # version of the library the kernel comes from, when not torch itself
    model_config: str  # canonical JSON of the transformers config
    dtype: str
    strategy: str
    kernel: str
    max_length: int
    mode: str
    compile: bool
    training: str | None = None  # canonical JSON of a training job's `training` section
    # `probe.mode` other than the default: a doubling search brackets the limit more coarsely, and a job asking
    # for one gets its own attempts
    search: str | None = None
    # A sharded training job that keeps its layers' gathered weights from forward to backward: a higher peak
    sharding: str | None = None

    def digest(self) -> str:
        fields = asdict(self)
        # keys stay what they were before these fields existed: inference, the default search and sharding
        for optional in ("training", "search", "sharding"):
            if fields[optional] is None:
                del fields[optional]
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CachedLimit:
    largest_fit: int
    smallest_oom: int | None
    predicted_limit: int | None
    ceiling: int  # the largest size the search was allowed to try
    used_by_others_bytes: int | None  # what other processes held when the limit was confirmed
    probes: list[ProbeAttempt]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        fields = asdict(self)
        fields["probes"] = [attempt.model_dump(mode="json") for attempt in self.probes]
        return fields

    @classmethod
    def from_json(cls, fields: dict[str, Any]) -> CachedLimit:
        return cls(**{**fields, "probes": [ProbeAttempt.model_validate(p) for p in fields["probes"]]})


def default_cache_path() -> Path:
    return WorkerSettings().cache_dir / CACHE_FILE_NAME


class ProbeCache:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_cache_path()

    def get(self, key: ProbeKey) -> CachedLimit | None:
        entry = self._read().get(key.digest())
        if entry is None:
            return None
        try:
            return CachedLimit.from_json(entry["limit"])
        except (KeyError, TypeError, ValueError):  # written by an older layout: re-probe
            return None

    def put(self, key: ProbeKey, limit: CachedLimit) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            entries = self._read()
            entries[key.digest()] = {"key": asdict(key), "limit": limit.to_json()}
            self._write(entries)

    def _read(self) -> dict[str, Any]:
        try:
            entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return entries if isinstance(entries, dict) else {}

    def _write(self, entries: dict[str, Any]) -> None:
        replace_json(self.path, entries, indent=1, sort_keys=True)

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.path)
