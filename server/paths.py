"""File names in a submitted spec must stay inside the roots the worker's operator configures.

A spec names data files, tokenizers and model directories relative to the worker's roots
(PADBENCH_DATA_ROOTS, PADBENCH_MODEL_ROOTS), which the worker resolves and confines itself. The server
refuses, before anything is stored, the names that could only be meant to leave a root: absolute paths, a
home directory (`~`), `..` components, and glob patterns. `synthetic` and `hf:` sources are not files.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.spec import AttentionJobSpec, PaddingJobSpec

NOT_FILES = ("synthetic",)
HUB_PREFIX = "hf:"
GLOB_CHARACTERS = frozenset("*?[]{}")


def name_problem(name: str) -> str | None:
    """Why `name` may not be used as a file name relative to a root, or None when it may."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "must be relative to the worker's roots, not an absolute path"
    if name.startswith("~"):
        return "must be relative to the worker's roots, not under a home directory (~)"
    if ".." in name.replace("\\", "/").split("/"):
        return "must not contain '..' components"
    if GLOB_CHARACTERS & set(name):
        return "must name one file or directory, not a glob pattern"
    return None


def named_paths(spec: PaddingJobSpec | AttentionJobSpec) -> list[tuple[list[str], str]]:
    """(location, name) of every file or directory name in the spec."""
    if not isinstance(spec, PaddingJobSpec):
        return []
    found: list[tuple[list[str], str]] = []
    if spec.data.source not in NOT_FILES and not spec.data.source.startswith(HUB_PREFIX):
        found.append((["spec", "data", "source"], spec.data.source))
    if spec.data.tokenizer is not None:
        found.append((["spec", "data", "tokenizer"], spec.data.tokenizer))
    if spec.model.path is not None:
        found.append((["spec", "model", "path"], spec.model.path))
    return found


def path_errors(spec: PaddingJobSpec | AttentionJobSpec) -> list[dict[str, Any]]:
    """422 error items, in the server's `{loc, msg, type}` shape, for every refused name."""
    errors = []
    for location, name in named_paths(spec):
        problem = name_problem(name)
        if problem is not None:
            errors.append({"loc": location, "msg": f"{name!r} {problem}", "type": "path_outside_roots"})
    return errors
