"""`batch_size: auto` in a padding job: probe every such strategy before the job's model is on the device.

The runner calls `probe_auto_batch_sizes` first thing, measures the returned spec (concrete sizes only),
then `attach_probe_reports` puts each report beside its strategy's result. Probing before the job builds
its model keeps the children's view of the device honest: nothing of this job is resident yet, so
"memory held by others" is really other processes.
"""

from __future__ import annotations

import torch

import worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.results import ProbeReport, StrategyResult
from padbench.contract.spec import PaddingJobSpec
from worker.engine.attention import resolve_kernel
from worker.engine.batches import STRATEGIES
from worker.engine.model import torch_dtype
from worker.probe.runner import ProgressFn, find_batch_size


def probe_auto_batch_sizes(spec: PaddingJobSpec, device: torch.device,
                           progress: ProgressFn) -> tuple[PaddingJobSpec, dict[int, ProbeReport]]:
    """The spec with every `auto` replaced by the probed size, and the reports by strategy position.

    Raises `worker.probe.runner.ProbeFailed` (with the child's log) when a strategy cannot be probed.
    """
    reports: dict[int, ProbeReport] = {}
    strategies = list(spec.strategies)
    for position, strategy in enumerate(spec.strategies):
        if spec.batch_size_for(strategy) != "auto":
            continue
        layout = STRATEGIES.get(strategy.name).layout
        kernel = resolve_kernel(spec.attention_for(strategy), layout, device, torch_dtype(spec.dtype))
        say = _labelled(progress, f"{strategy.label} / {kernel.name}: ")
        reports[position] = find_batch_size(spec, strategy, kernel.name, say)
        strategies[position] = strategy.model_copy(update={"batch_size": reports[position].chosen})
    if not reports:
        return spec, reports
    return spec.model_copy(update={"strategies": strategies}), reports


def attach_probe_reports(results: list[StrategyResult], reports: dict[int, ProbeReport]) -> list[StrategyResult]:
    return [result.model_copy(update={"probe": reports[position]}) if position in reports else result
            for position, result in enumerate(results)]


def _labelled(progress: ProgressFn, prefix: str) -> ProgressFn:
    # The probe runs before the job's own progress starts: its messages show, the bar stays at zero.
    return lambda _fraction, message: progress(0.0, prefix + message)
