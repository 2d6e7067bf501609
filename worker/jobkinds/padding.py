"""The `padding` job kind: measure batching layouts and attention kernels (padbench.worker.engine.runner)."""

from __future__ import annotations

from padbench.contract.results import PaddingResult
from padbench.contract.spec import PaddingJobSpec
from padbench.worker.jobkinds import JOB_KINDS, ProgressFn


class PaddingJob:
    def run(self, spec: PaddingJobSpec, progress: ProgressFn) -> PaddingResult:
        # Imported here so that listing job kinds never loads torch or transformers.
        from padbench.worker.engine.runner import run_padding_job

        return run_padding_job(spec, progress)


JOB_KINDS.add("padding", PaddingJob())
