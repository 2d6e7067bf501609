"""A queued job's file names resolved inside the roots this worker's operator allows, before the job runs.

Specs from the service name data files relative to PADBENCH_DATA_ROOTS and tokenizers and model
directories relative to PADBENCH_MODEL_ROOTS (or data roots, for tokenizers kept beside the data). Each
name is resolved with `realpath`, symlinks included, and must land inside the real root; the spec the
job runs then holds that real path, so nothing later opens a path that could change meaning. A name that
escapes a root, is missing or cannot be read gets one and the same answer, so a job cannot tell which,
and nothing is opened to find out. With no roots set only `synthetic`, `hf:` sources and hub model and
tokenizer names run. Which fields of a spec are file names is its kind's to say (its policy's `named_paths`,
the same the server checks at submit). An `hf:` source is no file name: the contract admits only the Hub's
form for it, checked again when the worker parses the lease's spec. `padbench run` on one's own machine never
comes through here: it reads any local path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from padbench.contract.spec import JobSpecBase
from padbench.kinds.record import kind_spec

S = TypeVar("S", bound=BaseModel)
J = TypeVar("J", bound=JobSpecBase)
# `name` or `org/name` on the Hugging Face hub.
HUB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


class PathRefused(ValueError):
    """A name in the spec does not resolve inside this worker's roots; the message names the field."""


def inside(root: Path, name: str) -> str | None:
    """The real path of `name` under `root`, or None when it is missing or resolves outside the root."""
    real_root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(real_root, name))
    if os.path.commonpath([real_root, candidate]) != real_root or not os.access(candidate, os.R_OK):
        return None
    return candidate


def resolve(name: str, roots: Sequence[Path], field: str, variables: str, hub_allowed: bool) -> str:
    if os.path.isabs(name) or name.startswith("~"):
        raise PathRefused(f"{field}: {name!r} must be relative to this worker's roots ({variables})")
    for root in roots:
        found = inside(root, name)
        if found is not None:
            return found
    if hub_allowed and HUB_NAME.fullmatch(name):
        return name  # a hub name; the job runs in an empty directory, so it cannot mean a local folder
    raise PathRefused(f"{field}: {name!r} is not a readable file or directory under this worker's roots ({variables})")


@dataclass(frozen=True)
class PathRule:
    """Where a file-name field may point: its roots (their variables, for the message) and whether a Hub name
    is allowed in its place."""

    data_roots: bool
    model_roots: bool
    hub_allowed: bool

    def roots(self, data_roots: Sequence[Path], model_roots: Sequence[Path]) -> list[Path]:
        return [*(model_roots if self.model_roots else []), *(data_roots if self.data_roots else [])]

    @property
    def variables(self) -> str:
        names = ["PADBENCH_MODEL_ROOTS"] * self.model_roots + ["PADBENCH_DATA_ROOTS"] * self.data_roots
        return ", ".join(names)


# Tokenizers may be kept beside the data; a field no rule names reads from the data roots, never the Hub.
PATH_RULES: dict[tuple[str, ...], PathRule] = {
    ("data", "source"): PathRule(data_roots=True, model_roots=False, hub_allowed=False),
    ("data", "tokenizer"): PathRule(data_roots=True, model_roots=True, hub_allowed=True),
    ("model", "path"): PathRule(data_roots=False, model_roots=True, hub_allowed=True),
}
DEFAULT_RULE = PathRule(data_roots=True, model_roots=False, hub_allowed=False)


def confine_spec_paths(spec: J, data_roots: Sequence[Path], model_roots: Sequence[Path]) -> J:
    """The spec with every file name its kind names replaced by its real path inside the roots."""
    for location, name in kind_spec(spec.kind).policy.named_paths(spec):
        field = tuple(location[1:])  # after "spec"
        rule = PATH_RULES.get(field, DEFAULT_RULE)
        real = resolve(name, rule.roots(data_roots, model_roots), ".".join(field), rule.variables, rule.hub_allowed)
        spec = replaced(spec, field, real)
    return spec


def replaced(model: S, field: tuple[str, ...], value: str) -> S:
    """A copy of the frozen `model` with the field at `field` (a path through nested models) set to `value`."""
    head, *rest = field
    inner = value if not rest else replaced(getattr(model, head), tuple(rest), value)
    return model.model_copy(update={head: inner})
