"""A queued job's file names resolved inside the roots this worker's operator allows, before the job runs.

Specs from the service name data files relative to PADBENCH_DATA_ROOTS and tokenizers and model
directories relative to PADBENCH_MODEL_ROOTS (or data roots, for tokenizers kept beside the data). Each
name is resolved with `realpath`, symlinks included, and must land inside the real root; the spec the
job runs then holds that real path, so nothing later opens a path that could change meaning. A name that
escapes a root, is missing or cannot be read gets one and the same answer, so a job cannot tell which,
and nothing is opened to find out. With no roots set only `synthetic`, `hf:` sources and hub model and
tokenizer names run. An `hf:` source is checked for the Hub's form again here (the contract's rule), so a
spec stored before that check, or sent by another server, cannot hand `datasets` a local path. `padbench run`
on one's own machine never comes through here: it reads any local path.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from padbench.contract.hub_dataset import is_hub_dataset, parse_hub_dataset

NOT_FILES = ("synthetic",)
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


def check_hub_dataset(source: str) -> None:
    try:
        parse_hub_dataset(source)
    except ValueError as error:
        raise PathRefused(f"data.source: {error}") from None


def confine_spec_paths(spec: dict[str, Any], data_roots: Sequence[Path], model_roots: Sequence[Path]) -> dict[str, Any]:
    """A copy of the spec document with every file name replaced by its real path inside the roots."""
    confined = copy.deepcopy(spec)
    data, model = confined.get("data") or {}, confined.get("model") or {}
    source = data.get("source")
    if isinstance(source, str) and is_hub_dataset(source):
        check_hub_dataset(source)
    elif isinstance(source, str) and source not in NOT_FILES:
        data["source"] = resolve(source, data_roots, "data.source", "PADBENCH_DATA_ROOTS", hub_allowed=False)
    if isinstance(data.get("tokenizer"), str):
        data["tokenizer"] = resolve(data["tokenizer"], [*model_roots, *data_roots], "data.tokenizer",
                                    "PADBENCH_MODEL_ROOTS, PADBENCH_DATA_ROOTS", hub_allowed=True)
    if isinstance(model, dict) and isinstance(model.get("path"), str):
        model["path"] = resolve(model["path"], model_roots, "model.path", "PADBENCH_MODEL_ROOTS", hub_allowed=True)
    return confined
