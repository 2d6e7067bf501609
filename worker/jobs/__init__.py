"""Job kinds, as the worker runs them: one runner per `kind` of job spec, in one folder per kind.

A kind's contract names its runner's module (`JobKind.runner`, e.g. `padbench.worker.jobs.padding`), whose
`RUNNER` runs its jobs. The supervisor (which must not import torch) lists the registered kinds without
loading them, and a runner is imported only when a job of its kind runs or its kernels are listed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from padbench.contract.kinds import JOB_KINDS, JOB_RESULT_ADAPTER, JOB_SPEC_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.contract.spec import JobSpecBase
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.progress import ProgressFn

# Called by a job kind each time a row (a strategy, a sweep cell) finishes, with the result as it would stand
# if the job stopped there: the rows so far, marked partial. The last one is what a cancel keeps.
PartialFn = Callable[[JobResultBase], None]


class JobRunner(Protocol):
    def run(self, spec: Any, progress: ProgressFn, on_partial: PartialFn) -> JobResultBase:
        """The job's result: rows measured in this process or in children it starts."""

    def kernel_names(self, device: str) -> list[str]:
        """The names a spec of this kind may use for what runs on `device` (a worker's capabilities);
        probes the device, so the supervisor calls it in a child process."""

    def findings(self, spec: Any) -> Iterator[tuple[bool, str]]:
        """What `padbench check` finds on this machine beyond a valid spec, each (fine, what): the model, the
        tokenizer, the device and the kernels, for kinds that build a model; nothing for others."""

    def planned_run(self, spec: Any) -> PaddingJobSpec | None:
        """The model run whose memory `padbench plan` lays out over GPUs and whose length `padbench run`
        estimates on a CPU; None for a kind that runs no such model."""


def get_job_runner(kind: str) -> JobRunner:
    """The runner of the registered kind `kind` (an unknown kind lists the known ones)."""
    runner: JobRunner = importlib.import_module(JOB_KINDS.get(kind).runner).RUNNER
    return runner


def spec_json(spec: JobSpecBase) -> str:
    """A spec as a job's child receives it: JSON text, parsed once there into the kind's model."""
    return JOB_SPEC_ADAPTER.dump_json(spec).decode()


def run_job(ctx: ChildContext, spec_text: str) -> dict[str, Any]:
    """Child-process entry point (`padbench.worker.jobs:run_job`): the spec as JSON text in (`spec_json`),
    JSON-ready result out.

    Each partial result on the way is handed to the parent (`ctx.finished`) as a JSON-ready document too.
    """
    from padbench.worker.engine.model.build import forget_model_configs  # torch: only in the job's child
    from padbench.worker.jobs.kernel_choice import settle_attention, stated

    spec: JobSpecBase = JOB_SPEC_ADAPTER.validate_json(spec_text)
    forget_model_configs()  # a job builds its model's config once, from the files as they are now
    # `attention: auto` is settled here, where the device is known: the kind runs the family picked.
    settled, picks = settle_attention(spec)
    for pick in picks or ():
        ctx.progress(0.0, f"attention auto ({pick.entry}): {pick.chosen}: {pick.reason}")

    def hand_over(partial: JobResultBase) -> None:
        ctx.finished(JOB_RESULT_ADAPTER.dump_python(stated(partial, spec, picks), mode="json"))

    result = get_job_runner(spec.kind).run(settled, ctx.progress, hand_over)
    return JOB_RESULT_ADAPTER.dump_python(stated(result, spec, picks), mode="json")
