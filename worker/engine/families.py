"""The worker's side of the attention kernel families: each declared kernel's implementation, found by the dotted
path its declaration names (`padbench/kernels/<family>.py`) and bound to the declared name, family and facts.

A declaration says what a kernel is called and what it applies; its implementation only how it computes. Binding
makes a subclass of the implementation that carries the declaration, so the facts are said once and one
implementation may serve several declarations. Each entry point's registry (`FamilyKernels`) follows the
registered families: a family registered after the worker started (a plugin's, a test's) is loaded at the next
lookup, and one taken out again is dropped.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from padbench.contract.kernel_families import families
from padbench.contract.kernel_family import KernelDeclaration, KernelFamily
from padbench.contract.registry import Registry

K = TypeVar("K")


def implementation(path: str) -> Any:
    """The object a declaration's dotted path names (`package.module.Attribute`), its module imported."""
    module, _, attribute = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ImportError(f"kernel implementation {path!r} cannot be imported: {error}") from error


def bound_class(declared: KernelDeclaration, family: str, base: type[object]) -> type[Any]:
    """A subclass of the implementation `declared` names (a subclass of `base`), carrying its name, its family and
    its facts."""
    cls = implementation(declared.implementation)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TypeError(f"{declared.implementation} (kernel {declared.name!r}) is no subclass of {base.__name__}")
    attributes = {"name": declared.name, "family": family, **declared.facts(), "__module__": cls.__module__}
    return type(f"{cls.__name__}[{declared.name}]", (cls,), attributes)


class FamilyKernels(Registry[K]):
    """The kernels of one entry point of every registered family, by name, loaded as the families come and go.

    `load` gives a family's kernels at this entry point (none where it has none), as (name, kernel) pairs.
    """

    def __init__(self, what: str, load: Callable[[KernelFamily], list[tuple[str, K]]]) -> None:
        super().__init__(what)
        self._load = load
        self._loaded: dict[str, tuple[KernelFamily, list[str]]] = {}

    def sync(self) -> None:
        registered = {family.name: family for family in families()}
        for name, (record, kernels) in list(self._loaded.items()):
            if registered.get(name) is not record:
                for kernel_name in kernels:
                    self._entries.pop(kernel_name, None)
                del self._loaded[name]
        for name, record in registered.items():
            if name not in self._loaded:
                loaded = self._load(record)
                for kernel_name, kernel in loaded:
                    super().add(kernel_name, kernel)
                self._loaded[name] = (record, [kernel_name for kernel_name, _ in loaded])

    def get(self, name: str) -> K:
        self.sync()
        return super().get(name)

    def __contains__(self, name: object) -> bool:
        self.sync()
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        self.sync()
        return super().__iter__()

    def items(self) -> list[tuple[str, K]]:
        self.sync()
        return super().items()
