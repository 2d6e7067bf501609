"""Job kinds, as the worker runs them: one runner per `kind` of job spec, looked up in JOB_RUNNERS.

Each kind's package registers its runner when imported. PLUGIN_MODULES names that package for every kind
this worker runs, so the supervisor (which must not import torch) lists kinds without loading them, and a
runner is imported only when a job of its kind runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

from padbench.contract.kinds import JOB_RESULT_ADAPTER, JOB_SPEC_ADAPTER
from padbench.contract.registry import Registry
from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.progress import ProgressFn

PLUGIN_MODULES: dict[str, str] = {
    "padding": "padbench.worker.jobs.padding",
    "attention": "padbench.worker.jobs.attention",
    "generate": "padbench.worker.jobs.generate",
}


# Called by a job kind each time a row (a strategy, a sweep cell) finishes, with the result as it would stand
# if the job stopped there: the rows so far, marked partial. The last one is what a cancel keeps.
PartialFn = Callable[[JobResultBase], None]


class JobRunner(Protocol):
    def run(self, spec: Any, progress: ProgressFn, on_partial: PartialFn) -> JobResultBase:
        """The job's result: rows measured in this process or in children it starts."""

    def kernel_names(self, device: str) -> list[str]:
        """The names a spec of this kind may use for what runs on `device` (a worker's capabilities);
        probes the device, so the supervisor calls it in a child process."""


JOB_RUNNERS: Registry[JobRunner] = Registry("job kind")


def get_job_runner(kind: str) -> JobRunner:
    if kind not in JOB_RUNNERS and kind in PLUGIN_MODULES:
        importlib.import_module(PLUGIN_MODULES[kind])
    return JOB_RUNNERS.get(kind)


def run_job(ctx: ChildContext, spec_document: dict[str, Any]) -> dict[str, Any]:
    """Child-process entry point (`padbench.worker.jobs:run_job`): spec in, JSON-ready result out.

    Each partial result on the way is handed to the parent (`ctx.finished`) as a JSON-ready document too.
    """
    spec: JobSpecBase = JOB_SPEC_ADAPTER.validate_python(spec_document)

    def hand_over(partial: JobResultBase) -> None:
        ctx.finished(JOB_RESULT_ADAPTER.dump_python(partial, mode="json"))

    result = get_job_runner(spec.kind).run(spec, ctx.progress, hand_over)
    return JOB_RESULT_ADAPTER.dump_python(result, mode="json")
