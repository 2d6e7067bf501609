"""Job kinds: one entry per `kind` of job, the list every side of padbench derives its kinds from.

An entry names a kind's spec model and result model. The unions the API bodies validate (`JobSpec`,
`JobResult`), `parse_job_spec` and the result files' adapter are all built from the registered entries,
so a new kind is one `register_job_kind` line below; each other side (worker runner, report, server
policy, dashboard) registers a plugin of its own for it, as docs/extending.md lists.

    register_job_kind(PaddingJobSpec, PaddingResult)

The API bodies (`padbench.contract.api`) take the unions when they are defined, so a kind registered after
that module was imported is known to the adapters here but not to the HTTP API of that process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeAlias, TypeVar, Union, cast, get_args

from pydantic import BaseModel, Field, TypeAdapter

from padbench.contract.attention_sweep import AttentionJobSpec, AttentionResult
from padbench.contract.generate import GenerateJobSpec, GenerateResult
from padbench.contract.padding import PaddingJobSpec, PaddingResult
from padbench.contract.registry import Registry
from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase

# A spec that names no kind is a padding job: padding was the only kind when the first specs were written.
DEFAULT_KIND = "padding"


@dataclass(frozen=True)
class JobKind:
    """What a kind of job is to the contract: the model of its spec and the model of its result."""

    spec: type[JobSpecBase]
    result: type[JobResultBase]

    @property
    def name(self) -> str:
        return kind_tag(self.spec)


JOB_KINDS: Registry[JobKind] = Registry("job kind")


def kind_tag(model: type[JobSpecBase] | type[JobResultBase]) -> str:
    """The one name a model's `kind` field allows (`Literal["padding"]` → `padding`)."""
    tags = get_args(model.model_fields["kind"].annotation)
    if len(tags) != 1 or not isinstance(tags[0], str):
        raise TypeError(f"{model.__name__}.kind must be a Literal of one name, e.g. Literal['padding']")
    return tags[0]


def register_job_kind(spec: type[JobSpecBase], result: type[JobResultBase]) -> JobKind:
    kind = JobKind(spec, result)
    if kind_tag(result) != kind.name:
        raise TypeError(f"{result.__name__}.kind is {kind_tag(result)!r}, but its spec's is {kind.name!r}")
    if "partial" not in result.model_fields:
        raise TypeError(f"{result.__name__} must end with `partial: PartialResult | None = None`")
    return JOB_KINDS.add(kind.name, kind)


register_job_kind(PaddingJobSpec, PaddingResult)
register_job_kind(AttentionJobSpec, AttentionResult)
register_job_kind(GenerateJobSpec, GenerateResult)


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
