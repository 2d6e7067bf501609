"""`batch_size: auto` in a padding job: probe every such strategy before the job's model is on the device.

The runner calls `probe_auto_batch_sizes` first thing, measures the returned spec (concrete sizes only),
then `attach_probe_reports` puts each report beside its strategy's result. Probing before the job builds
its model keeps the children's view of the device honest: nothing of this job is resident yet, so
"memory held by others" is really other processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.results import ProbeReport, StrategyResult
from padbench.contract.spec import PaddingJobSpec, StrategySpec
from padbench.worker.engine.attention import KernelUnavailable, resolve_kernel
from padbench.worker.engine.batches import STRATEGIES
from padbench.worker.jobs.padding.probe.trials import RankProbing, SharedProbes, find_batch_size
from padbench.worker.jobs.probing.oracle import ProbeFailed
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.progress import ProgressFn, progress_span


@dataclass(frozen=True)
class AutoSizes:
    """What probing a job's `auto` strategies gave: the spec to measure, reports, and probes that failed."""

    spec: PaddingJobSpec  # every successfully probed `auto` replaced by its chosen size
    reports: dict[int, ProbeReport] = field(default_factory=dict)  # by strategy position
    failures: dict[int, str] = field(default_factory=dict)  # by strategy position: why no size was found


def expand_axes(spec: PaddingJobSpec) -> PaddingJobSpec:
    """One strategy per batch size and experts' implementation, in the order the spec lists them: a list of
    sizes measures a batch-size curve, a list of implementations one row each (the OOM probe sizes each:
    they hold different intermediates).

    The copy is not validated again: its (strategy, attention) pairs repeat on purpose, one per size.
    """
    expanded = [strategy.model_copy(update={"batch_size": size, "experts": experts})
                for strategy in spec.strategies for size in spec.batch_sizes_for(strategy)
                for experts in spec.experts_for(strategy)]
    return spec.model_copy(update={"strategies": expanded})


def needs_probe(spec: PaddingJobSpec) -> bool:
    return any(spec.batch_size_for(strategy) == "auto" for strategy in spec.strategies)


def probe_auto_batch_sizes(spec: PaddingJobSpec, device: torch.device, progress: ProgressFn,
                           group: RankProbing | None = None) -> AutoSizes:
    """Probe every `auto` strategy of an expanded spec (one size per strategy), the bar advancing per probe.

    A probe that fails (a crash, a sticky CUDA error, even size 1 out of memory, an unavailable kernel)
    fails that strategy only: the job's other strategies are still measured.
    """
    sizes = AutoSizes(spec)
    strategies = list(spec.strategies)
    probed = [position for position, strategy in enumerate(spec.strategies) if spec.batch_size_for(strategy) == "auto"]
    with SharedProbes(spec, group) as shared:  # one session and one reading of the device for all of them
        for number, position in enumerate(probed):
            strategy = spec.strategies[position]
            span = progress_span(progress, number / len(probed), (number + 1) / len(probed))
            try:
                report = _probe(spec, strategy, device, span, shared, group)
            except (ProbeFailed, KernelUnavailable) as error:
                sizes.failures[position] = f"batch_size auto: {error}"
                continue
            sizes.reports[position] = report
            strategies[position] = strategy.model_copy(update={"batch_size": report.chosen})
    if sizes.reports:
        return replace(sizes, spec=spec.model_copy(update={"strategies": strategies}))
    return sizes


def _probe(spec: PaddingJobSpec, strategy: StrategySpec, device: torch.device, progress: ProgressFn,
           shared: SharedProbes, group: RankProbing | None) -> ProbeReport:
    layout = STRATEGIES.get(strategy.name).layout
    kernel = resolve_kernel(spec.attention_for(strategy), layout, device, torch_dtype(spec.dtype))
    return find_batch_size(spec, strategy, kernel.name, _labelled(progress, f"{strategy.label} / {kernel.name}: "),
                           shared=shared, group=group)


def unprobed_result(spec: PaddingJobSpec, strategy: StrategySpec, error: str) -> StrategyResult:
    """The row of a strategy whose size could not be probed: failed, with the reason, and nothing measured (a
    mixture's row names the experts implementation it was to run, as the kernel cell names the attention asked)."""
    attention = spec.attention_for(strategy)
    return StrategyResult(strategy=strategy.name, n_bins=strategy.n_bins, attention=attention, kernel=attention,
                          experts=strategy.experts, batch_size=None, status="failed", error=error)


def attach_probe_reports(results: list[StrategyResult], reports: dict[int, ProbeReport]) -> list[StrategyResult]:
    return [result.model_copy(update={"probe": reports[position]}) if position in reports else result
            for position, result in enumerate(results)]


def _labelled(progress: ProgressFn, prefix: str) -> ProgressFn:
    return lambda fraction, message: progress(fraction, prefix + message)
