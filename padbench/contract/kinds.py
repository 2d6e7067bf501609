"""Job kinds: the registered kinds, the list every side of padbench derives its kinds from.

A kind is one folder, `padbench/kinds/<kind>/`, whose `contract.py` declares its spec and result models in a
`JOB_KIND`, and whose `kind.py` assembles everything else it shows the world (server policy, report, plot,
metrics, dashboard view) into one `KindSpec` (`padbench.kinds.record`); its runner is one folder under
`worker/jobs/`, which `JOB_KIND.runner` names. Adding a kind is those two folders and one line in
`BUILT_IN_KINDS` below. Kinds kept outside padbench are named in `PADBENCH_KIND_PACKAGES` (packages separated
by commas), which every padbench process reads when this module is first imported.

The unions the API bodies validate (`JobSpec`, `JobResult`), `parse_job_spec` and the result files' adapter
are all built from the registered kinds. The API bodies (`padbench.contract.api`) take the unions when they
are defined, so a kind registered after that module was imported is known to the adapters here but not to
the HTTP API of that process.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeAlias, TypeVar, Union, cast

from pydantic import BaseModel, Field, TypeAdapter

from padbench.contract.job_kind import JobKind
from padbench.contract.registry import Registry
from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase

# A spec that names no kind is a padding job: padding was the only kind when the first specs were written.
DEFAULT_KIND = "padding"


JOB_KINDS: Registry[JobKind] = Registry("job kind")
BUILT_IN_KINDS = ("padbench.kinds.padding", "padbench.kinds.attention", "padbench.kinds.generate",
                  "padbench.kinds.tune")
PLUGIN_KINDS_VARIABLE = "PADBENCH_KIND_PACKAGES"


def register_kind_package(package: str) -> JobKind:
    """Register the kind whose folder is `package`: its `contract.JOB_KIND`."""
    kind = importlib.import_module(f"{package}.contract").JOB_KIND
    if not isinstance(kind, JobKind) or kind.package != package:
        raise TypeError(f"{package}.contract.JOB_KIND must be the JobKind of the models defined there")
    return JOB_KINDS.add(kind.name, kind)


def plugin_kind_packages() -> list[str]:
    return [name.strip() for name in os.environ.get(PLUGIN_KINDS_VARIABLE, "").split(",") if name.strip()]


for _package in (*BUILT_IN_KINDS, *plugin_kind_packages()):
    register_kind_package(_package)


def kind_union(model_of: Callable[[JobKind], type[BaseModel]]) -> Any:
    """The union of one model of every registered kind (its spec's or its result's), told apart by `kind`."""
    members = tuple(model_of(kind) for _, kind in JOB_KINDS.items())
    return Annotated[Union[members], Field(discriminator="kind")]  # noqa: UP007  (a union built at run time)


def _spec_model(kind: JobKind) -> type[BaseModel]:
    return kind.spec


def _result_model(kind: JobKind) -> type[BaseModel]:
    return kind.result


UNIONS: dict[str, Callable[[JobKind], type[BaseModel]]] = {"JobSpec": _spec_model, "JobResult": _result_model}

if TYPE_CHECKING:  # to a type checker, any kind's spec or result
    JobSpec: TypeAlias = JobSpecBase
    JobResult: TypeAlias = JobResultBase
else:
    def __getattr__(name: str) -> Any:
        """`JobSpec` and `JobResult` (PEP 562): to pydantic, the union of the kinds registered when the name is
        imported, so a module that uses one in a model (the API bodies) knows every kind registered before it."""
        if name in UNIONS:
            return kind_union(UNIONS[name])
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


M = TypeVar("M", JobSpecBase, JobResultBase)


class KindAdapter(Generic[M]):
    """A pydantic TypeAdapter of the union of every kind's spec (or result), rebuilt when a kind is added."""

    def __init__(self, model_of: Callable[[JobKind], type[BaseModel]]) -> None:
        self._model_of = model_of
        self._built: tuple[tuple[str, ...], TypeAdapter[Any]] | None = None

    def _adapter(self) -> TypeAdapter[Any]:
        kinds = tuple(JOB_KINDS)
        if self._built is None or self._built[0] != kinds:
            self._built = (kinds, TypeAdapter(kind_union(self._model_of)))
        return self._built[1]

    def validate_python(self, document: Any) -> M:
        return cast(M, self._adapter().validate_python(document))

    def validate_json(self, data: str | bytes) -> M:
        return cast(M, self._adapter().validate_json(data))

    def dump_python(self, value: M, **options: Any) -> Any:
        return self._adapter().dump_python(value, **options)

    def dump_json(self, value: M, **options: Any) -> bytes:
        return self._adapter().dump_json(value, **options)

    def json_schema(self, **options: Any) -> dict[str, Any]:
        return self._adapter().json_schema(**options)


JOB_SPEC_ADAPTER: KindAdapter[JobSpecBase] = KindAdapter(_spec_model)
JOB_RESULT_ADAPTER: KindAdapter[JobResultBase] = KindAdapter(_result_model)


def parse_job_spec(document: dict[str, Any]) -> JobSpecBase:
    """Validate a decoded YAML/JSON document; a missing `kind` means a padding job."""
    return JOB_SPEC_ADAPTER.validate_python({"kind": DEFAULT_KIND, **document})
