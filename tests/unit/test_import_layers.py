"""Dependencies point one way: every import of a padbench module goes down the layers, never up or across.

    contract (with each kind's models, kinds/<kind>/contract.py, and the kernel families, kernels/)
              <  shared helpers (http, specfile, report, kinds, tokens, machine, terminal_text)  <  server | client
    contract  <  worker runtime  <  engine  <  job kinds  <  supervisor  <  worker commands
    padbench.cli (the one `padbench` command) sits on top of everything.

Imports are read from the source (also those inside functions, which are often lazy on purpose) together
with the `module:function` targets handed to child processes, so a layer cannot be skipped by a string.
docs/architecture.md describes each layer.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Repository folder -> import name (setup.py installs them so).
PACKAGE_FOLDERS = {"padbench": "padbench", "server": "padbench.server", "worker": "padbench.worker",
                   "client": "padbench.client"}

# Layer name -> module prefixes in it; a module belongs to the layer with the longest matching prefix.
LAYERS: dict[str, tuple[str, ...]] = {
    # A kind's folder is shared helpers (its policy, report, plot, record) but for its models, which are contract.
    # The kernel families' declarations (padbench/kernels/) are contract too: the specs' attention names.
    "contract": ("padbench.contract", "padbench.kinds.*.contract", "padbench.kernels"),
    "shared": ("padbench.http", "padbench.specfile", "padbench.spec_overrides", "padbench.report", "padbench.tokens",
               "padbench.machine", "padbench.terminal_text", "padbench.kinds"),
    "server": ("padbench.server",),
    "client": ("padbench.client",),
    "runtime": ("padbench.worker.runtime",),
    "engine": ("padbench.worker.engine",),
    "jobs": ("padbench.worker.jobs",),
    "supervisor": ("padbench.worker.supervisor",),
    "worker-commands": ("padbench.worker.cli",),
    "top": ("padbench.cli",),
}
# What each layer may import besides itself. `padbench` alone (the version) is importable by all.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "shared": {"contract"},
    "server": {"contract", "shared"},
    "client": {"contract", "shared"},
    "runtime": {"contract"},
    "engine": {"contract", "runtime"},
    "jobs": {"contract", "runtime", "engine"},
    "supervisor": {"contract", "shared", "runtime", "engine", "jobs"},
    "worker-commands": {"contract", "shared", "runtime", "engine", "jobs", "supervisor"},
    "top": set(LAYERS) - {"top"},
}
# Package roots that only name the package (a docstring, the version): importable by all, importing nothing. A
# kind's folder is one: importing its models (contract) runs it, and it must not pull its report in with them.
KIND_FOLDERS = {f"padbench.kinds.{folder.name}" for folder in (REPO_ROOT / "padbench" / "kinds").iterdir()
                if (folder / "__init__.py").is_file()}
NEUTRAL = {"padbench", "padbench.worker", "padbench.kinds", *KIND_FOLDERS}
CHILD_TARGET = re.compile(r"^(padbench(?:\.\w+)+):\w+$")


def module_files() -> Iterator[tuple[str, Path]]:
    for folder, package in PACKAGE_FOLDERS.items():
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path


def layer_of(module: str) -> str | None:
    matches = [(len(prefix), name) for name, prefixes in LAYERS.items() for prefix in prefixes
               if fnmatch.fnmatchcase(module, prefix) or fnmatch.fnmatchcase(module, prefix + ".*")]
    return max(matches)[1] if matches else None


def imported_modules(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import and child-process target in the file."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            yield node.lineno, base
            # `from package import submodule` imports the submodule too (dunder names are attributes).
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names
                        if not alias.name.startswith("__"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = CHILD_TARGET.match(node.value)
            if target:
                yield node.lineno, target.group(1)


def violations(modules: Iterable[tuple[str, Path]]) -> list[str]:
    found = []
    for module, path in modules:
        own = layer_of(module)
        for line, imported in imported_modules(module, path):
            top = imported.split(".")[0]
            where = f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path.name}:{line}"
            if top in {"server", "worker", "client"}:
                found.append(f"{where}: imports `{imported}`; installed, it is `padbench.{imported}`")
                continue
            if top != "padbench" or imported in NEUTRAL:
                continue
            if module in NEUTRAL:
                found.append(f"{where}: `{module}` only names the package, yet imports `{imported}`")
                continue
            target = layer_of(imported)
            if target is None or own is None:
                found.append(f"{where}: `{module}` or `{imported}` belongs to no layer (add it to LAYERS)")
            elif target != own and target not in ALLOWED[own]:
                found.append(f"{where}: {own} (`{module}`) imports {target} (`{imported}`)")
    return found


def test_every_import_points_down_the_layers() -> None:
    assert violations(module_files()) == []


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = [module for module, _ in module_files() if module not in NEUTRAL and layer_of(module) is None]
    assert unplaced == []


@pytest.mark.parametrize(("module", "source", "complaint"), [
    ("padbench.worker.engine.data.sources", "from padbench.worker.jobs import run_job\n",
     "engine (`padbench.worker.engine.data.sources`) imports jobs"),
    ("padbench.worker.runtime.device", "import padbench.client.api\n",
     "runtime (`padbench.worker.runtime.device`) imports client"),
    ("padbench.contract.spec", "from ..server import main\n", "contract (`padbench.contract.spec`) imports server"),
    ("padbench.worker.supervisor.loop", "TARGET = 'padbench.worker.cli.run:main'\n",
     "supervisor (`padbench.worker.supervisor.loop`) imports worker-commands"),
    ("padbench.client.api", "from worker.engine import data\n", "installed, it is `padbench.worker.engine`"),
])
def test_an_upward_import_is_reported(tmp_path: Path, module: str, source: str, complaint: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(source)
    assert any(complaint in found for found in violations([(module, path)]))
