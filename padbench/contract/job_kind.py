"""What a kind of job is to the contract: its spec model, its result model and where the worker's runner lives.

Each kind's folder (`padbench/kinds/<kind>/`) ends its `contract.py` with one `JobKind`; `padbench.contract.kinds`
registers the folders, and everything else finds the kind's other parts from the folder this names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase


@dataclass(frozen=True)
class JobKind:
    spec: type[JobSpecBase]
    result: type[JobResultBase]
    # The module whose `RUNNER` runs the kind's jobs, imported by the worker only when a job of the kind runs
    # (it needs torch; nothing else may load it).
    runner: str

    def __post_init__(self) -> None:
        if kind_tag(self.result) != kind_tag(self.spec):
            raise TypeError(f"{self.result.__name__}.kind is {kind_tag(self.result)!r}, but its spec's is "
                            f"{kind_tag(self.spec)!r}")
        if "partial" not in self.result.model_fields:
            raise TypeError(f"{self.result.__name__} must end with `partial: PartialResult | None = None`")

    @property
    def name(self) -> str:
        return kind_tag(self.spec)

    @property
    def package(self) -> str:
        """The kind's folder as a package: where its spec model is defined (`padbench.kinds.padding`)."""
        return self.spec.__module__.rpartition(".")[0]


def kind_tag(model: type[JobSpecBase] | type[JobResultBase]) -> str:
    """The one name a model's `kind` field allows (`Literal["padding"]` → `padding`)."""
    tags = get_args(model.model_fields["kind"].annotation)
    if len(tags) != 1 or not isinstance(tags[0], str):
        raise TypeError(f"{model.__name__}.kind must be a Literal of one name, e.g. Literal['padding']")
    return tags[0]
