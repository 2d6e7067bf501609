"""What the server asks of a kind of job before it queues one: one KindPolicy per kind, in KIND_POLICIES.

The server never runs a job, so a policy answers from the spec alone and never reads a file: the
capabilities a worker must offer to claim the job (`server.requirements`), an upper bound of what the job
would compute (`server.cost`), and the file names the spec holds (`server.paths`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from padbench.contract.registry import Registry

S = TypeVar("S")  # the kind's spec model
# Where a file name stands in a request body, e.g. ["spec", "data", "source"], and the name itself.
NamedPath = tuple[list[str], str]


@dataclass(frozen=True)
class JobCost:
    tokens: int  # tokens fed through the model (padding jobs) or 0 (sweeps)
    flops: float | None  # None when the model is only known by files the server never reads


@dataclass(frozen=True)
class KindPolicy(Generic[S]):
    requirements: Callable[[S], set[str]]  # beyond `kind:<kind>`: `device:cuda`, `attention:<family>`, …
    cost: Callable[[S], JobCost]
    named_paths: Callable[[S], list[NamedPath]]


KIND_POLICIES: Registry[KindPolicy[Any]] = Registry("job kind")


def device_requirements(device: Literal["cuda", "cpu", "auto"]) -> set[str]:
    """A spec that pins the GPU needs a worker with one; `cpu` and `auto` run anywhere."""
    return {"device:cuda"} if device == "cuda" else set()


def no_paths(spec: object) -> list[NamedPath]:
    """For kinds whose specs name no file."""
    return []
