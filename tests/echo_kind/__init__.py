"""`echo`: a job kind that exists only in the tests, added the way every kind is: this one folder (its models,
runner, policy, report, plot, metric, dashboard view and record) and one line, `register_kind_package`, which
`registered()` runs for a block (or `PADBENCH_KIND_PACKAGES=tests.echo_kind` for a whole process). Nothing else
in padbench is edited, so a test proves a new kind flows through the server, the worker, the CLI, `/metrics`
and the dashboard.

It repeats a word: the spec names the word and how many times, the runner "measures" one row per time (handing
each over as it goes, as real kinds do).
"""

from __future__ import annotations

import functools

from tests.kind_packages import kind_package_registered

PACKAGE = "tests.echo_kind"
# The kind registered for a block: `with registered(): ...`
registered = functools.partial(kind_package_registered, PACKAGE)
