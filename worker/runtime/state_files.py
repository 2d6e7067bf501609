"""Files a worker keeps between jobs (the probe cache, the kernel speeds table): JSON documents several workers of
one box may share, so each change is made under an exclusive lock and lands by atomic rename (a worker killed
mid-write leaves the old document whole)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the lock beside `path` (`NAME.lock`) for a read-change-write of it."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def replace_json(path: Path, document: Any, **dump_options: Any) -> None:
    """Write `document` to a temporary file beside `path`, then rename it over `path`."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as stream:
            json.dump(document, stream, **dump_options)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
