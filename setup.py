"""Package layout: the repository's top-level folders install under the one import name `padbench`.

The folders stay where the project's layout puts them (`server/`, `worker/`, `client/`), and setuptools'
`package_dir` maps each into the `padbench` namespace, so an installed padbench adds exactly one top-level
package and never shadows another project's `server` or `worker`. The migrations (`alembic/`) and the
example specs (`examples/`) ship as package data through the links `padbench/migrations` and
`padbench/examples`.
Everything else (metadata, dependencies, extras, entry points) lives in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

KINDS = Path(__file__).resolve().parent / "padbench" / "kinds"
# Folder in the repository -> import name once installed.
MAPPED_FOLDERS = {
    "server": "padbench.server",
    "worker": "padbench.worker",
    "client": "padbench.client",
}


def mapped_packages() -> list[str]:
    # Namespace packages too: padbench/migrations (-> alembic/) and padbench/examples (-> examples/) hold
    # data read through importlib.resources, and must not carry an __init__.py (an `alembic/__init__.py`
    # would shadow the Alembic library for anything run from the repository root).
    packages = ["padbench", *(f"padbench.{name}" for name in find_namespace_packages("padbench"))]
    for folder, name in MAPPED_FOLDERS.items():
        packages += [name, *(f"{name}.{sub}" for sub in find_packages(folder))]
    return packages


setup(
    packages=mapped_packages(),
    package_dir={"padbench": "padbench", **{name: folder for folder, name in MAPPED_FOLDERS.items()}},
    package_data={
        "padbench.migrations": ["*.py", "*.mako"],
        "padbench.migrations.versions": ["*.py"],
        "padbench.examples": ["*.yaml"],
        # The dashboard's templates, scripts, styles and vendored libraries (Chart.js, Swagger UI, ReDoc).
        "padbench.server.web": ["templates/*.html", "static/*.js", "static/*.css", "static/vendor/*/*"],
        # Each job kind's dashboard view, in the kind's folder.
        **{f"padbench.kinds.{view.parent.name}": ["*.js"] for view in KINDS.glob("*/*.js")},
    },
)
