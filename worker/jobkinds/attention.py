"""The `attention` job kind: the attention kernel sweep (padbench.worker.sweep)."""

from __future__ import annotations

from padbench.contract.results import AttentionResult
from padbench.contract.spec import AttentionJobSpec
from padbench.worker.jobkinds import JOB_KINDS, ProgressFn
from padbench.worker.sweep.runner import run_attention_job


class AttentionJobKind:
    def run(self, spec: AttentionJobSpec, progress: ProgressFn) -> AttentionResult:
        return run_attention_job(spec, progress)


JOB_KINDS.add("attention", AttentionJobKind())
