"""File names in a submitted spec must stay inside the roots the worker's operator configures.

A spec names data files, tokenizers and model directories relative to the worker's roots
(PADBENCH_DATA_ROOTS, PADBENCH_MODEL_ROOTS), which the worker resolves and confines itself. The server
refuses, before anything is stored, the names that could only be meant to leave a root: absolute paths, a
home directory (`~`), `..` components, and glob patterns. Which names of a spec are file names is the
kind's to say (its policy's `named_paths`, in `padbench/kinds/<kind>/policy.py`).
"""

from __future__ import annotations

from typing import Any

from padbench.contract.spec import JobSpecBase
from padbench.kinds.record import kind_spec

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


def path_errors(spec: JobSpecBase) -> list[dict[str, Any]]:
    """422 error items, in the server's `{loc, msg, type}` shape, for every refused name."""
    errors = []
    for location, name in kind_spec(spec.kind).policy.named_paths(spec):
        problem = name_problem(name)
        if problem is not None:
            errors.append({"loc": location, "msg": f"{name!r} {problem}", "type": "path_outside_roots"})
    return errors
