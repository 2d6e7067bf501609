"""Targets for the child-session tests; free of torch so a spawned child starts in well under a second."""

from __future__ import annotations

import os
import time

from padbench.worker.runtime.isolation import ChildContext


def pid_or_fail(ctx: ChildContext, fail: bool | None) -> int:
    """This child's pid; `True` raises as an out-of-memory would, `None` hangs."""
    if fail is None:
        time.sleep(60)
    if fail:
        raise MemoryError("pretend the device ran out")
    return os.getpid()


def pid_plus(ctx: ChildContext, offset: int) -> int:
    """Another target for the same session: this child's pid plus `offset`."""
    return os.getpid() + offset
