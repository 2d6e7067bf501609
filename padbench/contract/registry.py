"""A typed registry: the one way plugin families (job kinds, strategies, kernels) are looked up.

It sits in the contract, below every other layer, so the server, the client and the worker each keep
registries of their own plugins with it. Plugins register under a name once, at import; lookups of
unknown names fail with the list of known ones, so a spec that names a kernel this build lacks gets a
clear error rather than a KeyError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownPlugin(LookupError):
    pass


class Registry(Generic[T]):
    def __init__(self, family: str) -> None:
        self.family = family
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(entry: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            self._entries[name] = entry
            return entry

        return add

    def add(self, name: str, entry: T) -> T:
        return self.register(name)(entry)

    def remove(self, name: str) -> None:
        """Take a plugin out again (a test that registers one for itself leaves the registry as it found it)."""
        self.get(name)  # an unknown name is the same error as on lookup
        del self._entries[name]

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownPlugin(f"unknown {self.family} {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())
