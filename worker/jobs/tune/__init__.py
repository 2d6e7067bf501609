"""The `tune` job kind: the fastest configuration that fits, found by trials (`job`), pruned by the memory plan
(`memory`) and measured as padding jobs in children of their own (`trials`)."""

from __future__ import annotations

from collections.abc import Iterator

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.tune.contract import TuneJobSpec, TuneResult
from padbench.worker.jobs import PartialFn
from padbench.worker.runtime.progress import ProgressFn

KERNEL_PROBE_TIMEOUT_S = 300.0


class TuneJob:
    def run(self, spec: TuneJobSpec, progress: ProgressFn, on_partial: PartialFn) -> TuneResult:
        # Imported here so that listing job kinds never loads torch or transformers.
        from padbench.worker.jobs.tune.job import run_tune_job

        return run_tune_job(spec, progress, on_partial, lambda: kernel_names_in_child(_device(spec), spec.mode))

    def kernel_names(self, device: str) -> list[str]:
        """A tune runs padding jobs (generate jobs in generate mode): the padding kind's kernels for claiming."""
        return trial_kind_kernels(device, "training")

    def findings(self, spec: TuneJobSpec) -> Iterator[tuple[bool, str]]:
        from padbench.worker.jobs.checks import generate_findings, padding_findings
        from padbench.worker.jobs.tune.space import configurations
        from padbench.worker.jobs.tune.trial_specs import generate_spec, padding_spec

        first = configurations(spec, ["sdpa"])[:1]  # the model, data and device, as every trial builds them
        if not first:
            return iter(())
        if spec.mode == "generate":
            return generate_findings(generate_spec(spec, first, batches=1))
        return padding_findings(padding_spec(spec, first, batches=1))

    def planned_run(self, spec: TuneJobSpec) -> PaddingJobSpec | None:
        from padbench.worker.jobs.tune.space import configurations
        from padbench.worker.jobs.tune.trial_specs import padding_spec

        first = configurations(spec, ["sdpa"])[:1]
        if not first or spec.mode == "generate":  # a KV cache is sized by each trial, not by the plan
            return None
        return padding_spec(spec, first, batches=1)


def kernel_names_in_child(device: str, mode: str) -> list[str]:
    """The kernels that run here for the trials' kind, probed in a child: probing creates a CUDA context, which the
    tune's own process would otherwise hold (and take from every trial's memory) until it ends."""
    from padbench.worker.runtime.isolation import run_in_child

    report = run_in_child(f"{__name__}:probe_kernel_names", device, mode, timeout_s=KERNEL_PROBE_TIMEOUT_S)
    if report.outcome != "ok":
        raise RuntimeError(f"could not list the kernels that run on {device}: {report.error}")
    return list(report.value)


def probe_kernel_names(ctx: object, device: str, mode: str) -> list[str]:
    return trial_kind_kernels(device, mode)


def trial_kind_kernels(device: str, mode: str) -> list[str]:
    from padbench.worker.jobs import get_job_runner

    return get_job_runner("generate" if mode == "generate" else "padding").kernel_names(device)


def _device(spec: TuneJobSpec) -> str:
    from padbench.worker.runtime.device import resolve_device

    return resolve_device(spec.device).type


RUNNER = TuneJob()
