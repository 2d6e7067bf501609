"""What the server asks of a kind of job before it queues one: its `KindPolicy`, part of the kind's record.

The server never runs a job, so a policy answers from the spec alone and never reads a file: the
capabilities a worker must offer to claim the job (`server.requirements`), an upper bound of what the job
would compute (`server.cost`), and the file names the spec holds (`server.paths`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from padbench.contract.hub_dataset import is_hub_dataset
from padbench.contract.model_spec import ModelSpec
from padbench.contract.spec import DataSpec

# A data source that is not a file: generated. Hub data sets (`hf:`) are not files either; the contract
# admits only names of the Hub's form for them.
NOT_FILES = ("synthetic",)

S = TypeVar("S")  # the kind's spec model
ATTENTION_PREFIX = "attention:"
# Where a file name stands in a request body, e.g. ["spec", "data", "source"], and the name itself.
NamedPath = tuple[list[str], str]


@dataclass(frozen=True)
class JobCost:
    tokens: int  # tokens fed through the model (padding jobs) or 0 (sweeps)
    flops: float | None  # None when the model is only known by files the server never reads


@dataclass(frozen=True)
class KindPolicy(Generic[S]):
    requirements: Callable[[S], set[str]]  # beyond `kind:<kind>`: `device:cuda`, `attention:<kind>:<family>`, …
    cost: Callable[[S], JobCost]
    named_paths: Callable[[S], list[NamedPath]]


def attention_requirement(kind: str, name: str) -> str:
    """What a job of `kind` naming attention `name` (a kernel family or `flash`) requires: `attention:generate:sdpa`.
    Per kind, because a family may run for one kind and not another (flash-attn computes padded rows and packs,
    but has no KV-cache path), and a worker lists per kind what it runs (`Capabilities.kernels_by_kind`)."""
    return f"{ATTENTION_PREFIX}{kind}:{name}"


def device_requirements(device: Literal["cuda", "cpu", "auto"]) -> set[str]:
    """A spec that pins the GPU needs a worker with one; `cpu` and `auto` run anywhere."""
    return {"device:cuda"} if device == "cuda" else set()


def no_paths(spec: object) -> list[NamedPath]:
    """For kinds whose specs name no file."""
    return []


def model_and_data_paths(data: DataSpec, model: ModelSpec) -> list[NamedPath]:
    """The file names of the specs of kinds that read data and build a model: the source, tokenizer, model."""
    found: list[NamedPath] = []
    if data.source not in NOT_FILES and not is_hub_dataset(data.source):
        found.append((["spec", "data", "source"], data.source))
    if data.tokenizer is not None:
        found.append((["spec", "data", "tokenizer"], data.tokenizer))
    if model.path is not None:
        found.append((["spec", "model", "path"], model.path))
    return found
