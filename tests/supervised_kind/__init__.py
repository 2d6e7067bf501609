"""`supervised`: a job kind for the supervisor's tests, whose spec carries what the test children do (write their
pid, hold memory, record their GPUs, run for a while) and a data section whose file names the worker confines.
The supervisor parses every lease's spec into its kind's model, so the tests' specs are real specs of this kind.
"""

from __future__ import annotations

import functools

from tests.kind_packages import kind_package_registered

PACKAGE = "tests.supervised_kind"
# The kind registered for a block: `with registered(): ...`
registered = functools.partial(kind_package_registered, PACKAGE)
