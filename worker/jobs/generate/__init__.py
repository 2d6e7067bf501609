"""The `generate` job kind: batched generation measured per batching strategy and attention kernel.

- `job`: `run_generate_job(spec, progress, on_partial) -> GenerateResult`: model and requests once, then rows;
- `schedule`: the strategies as step plans; `passes`: one timed pass; `row`: one strategy row, gated;
- `gate`: greedy tokens against one request at a time; `references`: transformers' own loops;
- `figures`: throughput, latency, slot use, bandwidth and MFU from the timed steps.
"""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.generate.contract import GenerateJobSpec, GenerateResult
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.jobs import PartialFn
from padbench.worker.runtime.progress import ProgressFn


class GenerateJob:
    def run(self, spec: GenerateJobSpec, progress: ProgressFn, on_partial: PartialFn) -> GenerateResult:
        # Imported here so that listing job kinds never loads torch or transformers.
        from padbench.worker.jobs.generate.job import run_generate_job

        return run_generate_job(spec, progress, on_partial)

    def kernel_names(self, device: str) -> list[str]:
        """The attention families whose KV-cache (decode) kernel runs here: families without one (a flash library
        that only computes padded rows and packs) are never offered to generate jobs."""
        from padbench.worker.engine.decoding.registry import runnable_decode_families

        return runnable_decode_families(device)

    def findings(self, spec: GenerateJobSpec) -> Iterator[tuple[bool, str]]:
        from padbench.worker.jobs.checks import generate_findings

        return generate_findings(spec)

    def planned_run(self, spec: GenerateJobSpec) -> PaddingJobSpec | None:
        return None  # a KV cache's memory is sized by the job itself (batch_size: auto), not by the plan


RUNNER = GenerateJob()
