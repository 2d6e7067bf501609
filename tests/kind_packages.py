"""Registering a test's job-kind package for a block, as a plugin does for a process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def kind_package_registered(package: str) -> Iterator[None]:
    """The kind in `package` registered for the block, and taken out again after."""
    from padbench.contract.kinds import JOB_KINDS, register_kind_package

    kind = register_kind_package(package)
    try:
        yield
    finally:
        JOB_KINDS.remove(kind.name)
