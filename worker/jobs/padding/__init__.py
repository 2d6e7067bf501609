"""The `padding` job kind: batching layouts and attention kernels measured on one model and data set.

- `job`: `run_padding_job(spec, progress, on_partial) -> PaddingResult`: data and model once, then each strategy;
- `strategy_run`: one strategy gated, warmed up, measured and summarised;
- `auto_batch` and `probe/`: `batch_size: auto`, the OOM probe that runs in child processes.
"""

from __future__ import annotations

from padbench.contract.results import PaddingResult
from padbench.contract.spec import PaddingJobSpec
from padbench.worker.jobs import JOB_KINDS, PartialFn
from padbench.worker.runtime.progress import ProgressFn


class PaddingJob:
    def run(self, spec: PaddingJobSpec, progress: ProgressFn, on_partial: PartialFn) -> PaddingResult:
        # Imported here so that listing job kinds never loads torch or transformers.
        from padbench.worker.jobs.padding.job import run_padding_job

        return run_padding_job(spec, progress, on_partial)


JOB_KINDS.add("padding", PaddingJob())
