"""Plugins that only the tests define, each added the way docs/extending.md says: an attention kernel family as
one module (`math_family.py`, the declaration) and the classes it names (`math_kernels.py`), and a generate
strategy as one module (`longest_first.py`). Nothing else in padbench is edited for them; `registered_family` and
`registered_strategy` add them for a block and take them out again after.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from padbench.contract.kernel_families import KERNEL_FAMILIES, register_family_module
from padbench.contract.kernel_family import KernelFamily

FAMILY_MODULE = "tests.plugins.math_family"
STRATEGY_MODULE = "tests.plugins.longest_first"


@contextmanager
def registered_family(module: str = FAMILY_MODULE) -> Iterator[KernelFamily]:
    """The family `module` declares, registered for the block (as `PADBENCH_KERNEL_FAMILIES` registers it for a
    whole process)."""
    family = register_family_module(module)
    try:
        yield family
    finally:
        KERNEL_FAMILIES.remove(family.name)


@contextmanager
def registered_strategy(module: str = STRATEGY_MODULE) -> Iterator[str]:
    """The generate strategy `module` registers when imported, for the block; its name."""
    from padbench.worker.jobs.generate.strategies import GENERATE_STRATEGIES

    before = set(GENERATE_STRATEGIES)
    importlib.import_module(module)
    [name] = set(GENERATE_STRATEGIES) - before
    try:
        yield name
    finally:
        GENERATE_STRATEGIES.remove(name)
        sys.modules.pop(module, None)  # imported again, it registers again
