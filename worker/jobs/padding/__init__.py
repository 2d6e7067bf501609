"""The `padding` job kind: batching layouts and attention kernels measured on one model and data set.

- `job`: `run_padding_job(spec, progress, on_partial) -> PaddingResult`: data and model once, then each strategy;
- `strategy_run`: one strategy gated, warmed up, measured and summarised (`row_figures`: its figures over every rank);
- `auto_batch` and `probe/`: `batch_size: auto`, the OOM probe that runs in child processes (its kind-neutral
  search, child helpers and oracle are in `padbench.worker.jobs.probing`).
"""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult
from padbench.worker.jobs import PartialFn
from padbench.worker.runtime.progress import ProgressFn


class PaddingJob:
    def run(self, spec: PaddingJobSpec, progress: ProgressFn, on_partial: PartialFn) -> PaddingResult:
        # Imported here so that listing job kinds never loads torch or transformers.
        if isinstance(spec.gpus, list):  # a scaling axis: each GPU count on a launch of its own
            from padbench.worker.jobs.padding.scaling import run_scaling

            return run_scaling(spec, progress, on_partial)
        from padbench.worker.jobs.padding.job import run_padding_job

        return run_padding_job(spec, progress, on_partial)

    def kernel_names(self, device: str) -> list[str]:
        """The attention families whose every padded and packed kernel runs here: a padding spec names families
        (`sdpa`, `torch-flash`, …). A family that runs only some of its layouts here is left out, so no job is
        claimed for a layout that would fail. (Its kernels go unlisted: some share their family's name, and
        `torch-flash` running padded rows is not the family running.)"""
        from padbench.worker.engine.attention import runnable_families

        return runnable_families(device)

    def findings(self, spec: PaddingJobSpec) -> Iterator[tuple[bool, str]]:
        from padbench.worker.jobs.checks import padding_findings

        return padding_findings(spec)

    def planned_run(self, spec: PaddingJobSpec) -> PaddingJobSpec | None:
        return spec


RUNNER = PaddingJob()
