"""The attention kernel sweep (`kind: attention`): each kernel × sequence length measured in child processes.

- `kernels`: the kernel plugin family (SWEEP_KERNELS) and `available_sweep_kernels(device)` for capabilities;
- `inputs`: a cell's problem and its random tensors (dense, or documents packed into rows for `varlen`);
- `measure`: time, TFLOP/s, peak memory and error against float64 for one cell;
- `cells`: cells run in children, so an OOM or a sticky CUDA error costs one child;
- `matmul`: the device's measured matmul rate and environment, for context;
- `job`: `run_attention_job(spec, progress, on_partial) -> AttentionResult`;
- this module registers the job kind and imports `job` only when a job runs.

Listing capabilities loads only `kernels`: nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.attention.contract import AttentionJobSpec, AttentionResult
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.jobs import PartialFn
from padbench.worker.runtime.progress import ProgressFn


class AttentionSweep:
    def run(self, spec: AttentionJobSpec, progress: ProgressFn, on_partial: PartialFn) -> AttentionResult:
        # Imported here so that listing job kinds and sweep kernels never loads torch.
        from padbench.worker.jobs.attention.job import run_attention_job

        return run_attention_job(spec, progress, on_partial)

    def kernel_names(self, device: str) -> list[str]:
        """The sweep kernels that run here (`naive`, `sdpa-flash`, `varlen`, …)."""
        from padbench.worker.jobs.attention.kernels import available_sweep_kernels

        return available_sweep_kernels(device)

    def findings(self, spec: AttentionJobSpec) -> Iterator[tuple[bool, str]]:
        return iter(())  # a sweep builds no model: its cells refuse what does not run, with the reason

    def planned_run(self, spec: AttentionJobSpec) -> PaddingJobSpec | None:
        return None


RUNNER = AttentionSweep()
