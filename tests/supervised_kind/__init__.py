"""`supervised`: a job kind for the supervisor's tests, whose spec carries what the test children do (write their
pid, hold memory, record their GPUs, run for a while) and a data section whose file names the worker confines.
The supervisor parses every lease's spec into its kind's model, so the tests' specs are real specs of this kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

PACKAGE = "tests.supervised_kind"


@contextmanager
def registered() -> Iterator[None]:
    from padbench.contract.kinds import JOB_KINDS, register_kind_package

    kind = register_kind_package(PACKAGE)
    try:
        yield
    finally:
        JOB_KINDS.remove(kind.name)
