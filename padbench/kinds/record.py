"""`KindSpec`: one record per job kind, assembling everything the kind shows the world that needs no torch.

The server (requirements, cost, file names), `/metrics`, the reports (terminal, CSV, compare, verdict), the
plot, the dashboard and the worker's commands find a kind's parts here, by the name a spec or result carries,
and nothing else switches on a kind. The record of a registered kind is its folder's `kind.py` (`KIND`),
imported the first time it is asked for, so a process pays only for the kinds it reads.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from padbench.contract.job_kind import JobKind
from padbench.contract.kinds import JOB_KINDS

S = TypeVar("S")  # the kind's spec model
R = TypeVar("R")  # the kind's result model
if TYPE_CHECKING:  # annotations only: the reports import this module to find a result's record
    from matplotlib.figure import Figure

    from padbench.kinds.policy import KindPolicy
    from padbench.report.kind import KindReport

# A kind's drawing: pyplot and the jobs (all of the kind, as (id, result) pairs) in, their figure out, untitled.
KindPlot = Callable[[Any, list[tuple[int | None, Any]]], "Figure"]
# One gauge sample: its label values, in the metric's label order, and its value.
Sample = tuple[tuple[str, ...], float]


@dataclass(frozen=True)
class KindMetric(Generic[R]):
    """A Prometheus gauge a kind exports from its newest results: the first sample of each label set wins, so
    the figure shown is the newest measurement of that row."""

    name: str
    help: str
    labels: tuple[str, ...]
    samples: Callable[[R], Iterable[Sample]]


@dataclass(frozen=True)
class KindSpec(Generic[S, R]):
    contract: JobKind  # spec and result models; the worker's runner module
    policy: KindPolicy[S]
    report: KindReport[R]
    plot: KindPlot | None = None  # None: `padbench plot` says it cannot draw the kind yet
    metrics: tuple[KindMetric[R], ...] = ()
    # The dashboard's script for the kind's pages, beside the record in its folder; None: the raw result only.
    view: str | None = "view.js"

    @property
    def name(self) -> str:
        return self.contract.name

    def view_path(self) -> Path | None:
        """The view script's file, found beside the kind's record."""
        if self.view is None:
            return None
        module = importlib.import_module(f"{self.contract.package}.kind")
        return Path(module.__file__ or "").parent / self.view


def kind_spec(name: str) -> KindSpec[Any, Any]:
    """The record of the registered kind `name` (an unknown name lists the known ones)."""
    package = JOB_KINDS.get(name).package
    record = importlib.import_module(f"{package}.kind").KIND
    if not isinstance(record, KindSpec) or record.name != name:
        raise TypeError(f"{package}.kind.KIND must be the KindSpec of the {name!r} kind")
    return record


def kind_specs() -> list[KindSpec[Any, Any]]:
    """Every registered kind's record, in registration order."""
    return [kind_spec(name) for name in JOB_KINDS]


def kinds_in_words() -> str:
    """Every kind in plural, for messages: `padding jobs or attention sweeps`."""
    return " or ".join(kind.report.plural for kind in kind_specs())
