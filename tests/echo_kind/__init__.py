"""`echo`: a job kind that exists only in the tests, added the way every kind is: this one folder (its models,
runner, policy, report, plot, metric, dashboard view and record) and one line, `register_kind_package`, which
`registered()` runs for a block (or `PADBENCH_KIND_PACKAGES=tests.echo_kind` for a whole process). Nothing else
in padbench is edited, so a test proves a new kind flows through the server, the worker, the CLI, `/metrics`
and the dashboard.

It repeats a word: the spec names the word and how many times, the runner "measures" one row per time (handing
each over as it goes, as real kinds do).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

PACKAGE = "tests.echo_kind"


@contextmanager
def registered() -> Iterator[None]:
    """The echo kind registered for the block, and taken out again after."""
    from padbench.contract.kinds import JOB_KINDS, register_kind_package

    kind = register_kind_package(PACKAGE)
    try:
        yield
    finally:
        JOB_KINDS.remove(kind.name)
