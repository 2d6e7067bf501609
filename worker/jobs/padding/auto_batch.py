"""`batch_size: auto` (and `auto:N`) in a padding job: probe every such strategy before the job's model is on
the device.

The runner calls `probe_auto_batch_sizes` first thing, measures the returned spec (concrete sizes only, and for
`auto:N` on binned a size per length tier), then `attach_probe_reports` puts each report beside its strategy's
result. Probing before the job builds its model keeps the children's view of the device honest: nothing of this
job is resident yet, so "memory held by others" is really other processes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.batch_size import auto_times
from padbench.contract.results import BatchTier, ProbeReport
from padbench.contract.spec import StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec, StrategyResult
from padbench.worker.engine.attention import KernelUnavailable, resolve_kernel
from padbench.worker.engine.data.batches import STRATEGIES
from padbench.worker.engine.strategies.tiers import TieredStrategy, Tiers, length_tiers
from padbench.worker.jobs.padding.probe.trials import RankProbing, SharedProbes, find_batch_size
from padbench.worker.jobs.probing.oracle import ProbeFailed
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.progress import ProgressFn, progress_span

LengthsFn = Callable[[], Sequence[int]]  # the job's sequence lengths, read only where `auto:N` tiers need them


@dataclass(frozen=True)
class AutoSizes:
    """What probing a job's `auto` strategies gave: the spec to measure, reports, and probes that failed."""

    spec: PaddingJobSpec  # every successfully probed `auto` replaced by its chosen size
    reports: dict[int, ProbeReport] = field(default_factory=dict)  # by strategy position
    failures: dict[int, str] = field(default_factory=dict)  # by strategy position: why no size was found
    tiers: dict[int, list[BatchTier]] = field(default_factory=dict)  # by strategy position: `auto:N`'s sizes
    times: dict[int, int] = field(default_factory=dict)  # by strategy position: N of `auto:N`

    def tiers_of(self, position: int) -> Tiers | None:
        """The (longest, batch size) tiers a strategy is batched in; None where it has one size."""
        tiers = self.tiers.get(position)
        return [(tier.longest, tier.batch_size) for tier in tiers] if tiers and len(tiers) > 1 else None


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
    return any(auto_times(spec.batch_size_for(strategy)) for strategy in spec.strategies)


def probe_auto_batch_sizes(spec: PaddingJobSpec, device: torch.device, progress: ProgressFn,
                           group: RankProbing | None = None, lengths: LengthsFn | None = None) -> AutoSizes:
    """Probe every `auto` strategy of an expanded spec (one size per strategy), the bar advancing per probe.

    A probe that fails (a crash, a sticky CUDA error, even size 1 out of memory, an unavailable kernel)
    fails that strategy only: the job's other strategies are still measured.
    """
    sizes = AutoSizes(spec)
    strategies = list(spec.strategies)
    probed = {position: times for position, strategy in enumerate(spec.strategies)
              if (times := auto_times(spec.batch_size_for(strategy)))}
    read_lengths = functools.cache(lengths or (lambda: []))
    with SharedProbes(spec, group) as shared:  # one session and one reading of the device for all of them
        for number, (position, times) in enumerate(probed.items()):
            strategy = spec.strategies[position]
            span = progress_span(progress, number / len(probed), (number + 1) / len(probed))
            tiers = _length_tiers(spec, strategy, times, read_lengths)
            try:
                probes = [_probe(_at_width(spec, longest), strategy, device, _tier_span(span, tier, len(tiers)),
                                 shared, group) for tier, (longest, _) in enumerate(tiers)]
            except (ProbeFailed, KernelUnavailable) as error:
                sizes.failures[position] = f"batch_size {spec.batch_size_for(strategy)}: {error}"
                continue
            sizes.reports[position] = probes[-1]  # the longest tier's: the size every batch could take
            strategies[position] = strategy.model_copy(update={"batch_size": probes[-1].chosen})
            if times > 1:
                sizes.times[position] = times
                sizes.tiers[position] = [BatchTier(longest=longest, sequences=count, batch_size=report.chosen,
                                                   probe=report)
                                         for (longest, count), report in zip(tiers, probes, strict=True)]
    if sizes.reports:
        return replace(sizes, spec=spec.model_copy(update={"strategies": strategies}))
    return sizes


def _length_tiers(spec: PaddingJobSpec, strategy: StrategySpec, times: int,
                  lengths: LengthsFn) -> list[tuple[int, int | None]]:
    """(longest, sequences) per tier to probe: N length tiers of the data for a strategy that batches by length,
    else one at max_length (every batch of the others shares that worst case; its count is not needed)."""
    if times > 1 and isinstance(STRATEGIES.get(strategy.name), TieredStrategy) and (known := lengths()):
        return list(length_tiers(known, times))
    return [(spec.data.max_length, None)]


def _at_width(spec: PaddingJobSpec, longest: int) -> PaddingJobSpec:
    """The spec as the probe sees it for rows of at most `longest` tokens (a tier's widest batch)."""
    if longest == spec.data.max_length:
        return spec
    return spec.model_copy(update={"data": spec.data.model_copy(update={"max_length": longest})})


def _tier_span(span: ProgressFn, tier: int, tiers: int) -> ProgressFn:
    if tiers == 1:
        return span
    return labelled(progress_span(span, tier / tiers, (tier + 1) / tiers), f"tier {tier + 1}/{tiers}: ")


def _probe(spec: PaddingJobSpec, strategy: StrategySpec, device: torch.device, progress: ProgressFn,
           shared: SharedProbes, group: RankProbing | None) -> ProbeReport:
    kernel = probed_kernel(spec, strategy, device)
    return find_batch_size(spec, strategy, kernel, labelled(progress, f"{strategy.label} / {kernel}: "),
                           shared=shared, group=group)


def probed_kernel(spec: PaddingJobSpec, strategy: StrategySpec, device: torch.device) -> str:
    """The kernel a strategy's row will run, which its probe children run too (raises `KernelUnavailable`)."""
    layout = STRATEGIES.get(strategy.name).layout
    return resolve_kernel(spec.attention_for(strategy), layout, device, torch_dtype(spec.dtype)).name


def unprobed_result(spec: PaddingJobSpec, strategy: StrategySpec, error: str) -> StrategyResult:
    """The row of a strategy whose size could not be probed: failed, with the reason, and nothing measured (a
    mixture's row names the experts implementation it was to run, as the kernel cell names the attention asked)."""
    attention = spec.attention_for(strategy)
    return StrategyResult(strategy=strategy.name, n_bins=strategy.n_bins,
                          pad_to_multiple_of=strategy.pad_to_multiple_of,
                          crosses_documents=STRATEGIES.get(strategy.name).crosses_documents,
                          attention=attention, kernel=attention, experts=strategy.experts, batch_size=None,
                          status="failed", error=error)


def attach_probe_reports(results: list[StrategyResult], sizes: AutoSizes) -> list[StrategyResult]:
    """Each probed row with its report, and for `auto:N` the N asked and the sizes chosen per tier."""
    return [result.model_copy(update={"probe": sizes.reports[position], "auto_times": sizes.times.get(position),
                                      "batch_tiers": sizes.tiers.get(position)})
            if position in sizes.reports else result for position, result in enumerate(results)]


def labelled(progress: ProgressFn, prefix: str) -> ProgressFn:
    return lambda fraction, message: progress(fraction, prefix + message)
