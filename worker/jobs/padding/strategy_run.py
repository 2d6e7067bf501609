"""One strategy of a padding job: resolve its kernel, gate its layout, build and measure its batches.

The order is the method: the correctness gate runs before anything is timed; every batch is built,
sanity-checked, moved to the device and prepared by the kernel before the clock starts; compile time
lands in the warm-up; memory peaks cover exactly the device-resident batches, warm-up and measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.experts import ExpertLoad
from padbench.contract.results import EnergyUse, GpuActivity, MemoryStats
from padbench.contract.spec import MeasurementSpec, StrategySpec
from padbench.contract.training import StepSplit
from padbench.kinds.padding.contract import CompileReport, StrategyResult
from padbench.worker.engine.attention import AttentionKernel, resolve_kernel
from padbench.worker.engine.attention.features import AttentionFeatures, GqaHandling
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PaddedBatch, Strategy, longest_attention_span
from padbench.worker.engine.measure.correctness import GateResult, check_layout, references_with_noise
from padbench.worker.engine.measure.timing import Measurement, batch_sanity_error, clock_for, invalid_reason, measure
from padbench.worker.engine.model.expert_load import count_expert_load
from padbench.worker.engine.model.experts import ExpertsUnavailable, use_experts
from padbench.worker.engine.parallel.dealing import dealt_share
from padbench.worker.engine.parallel.overlap import CollectiveTime
from padbench.worker.engine.parallel.sharding import autocast_forward, autocast_if
from padbench.worker.engine.strategies.tiers import TieredStrategy, Tiers
from padbench.worker.engine.training.steps import (
    KernelForwardFn,
    StepFn,
    compiled_graph_count,
    inference_step,
    make_optimizer,
    next_token_labels,
    training_step,
)
from padbench.worker.jobs.padding.compiling import RowCompiler, RowSettings, choose_compiled_step
from padbench.worker.jobs.padding.oom_hint import with_fitting_settings
from padbench.worker.jobs.padding.rank_steps import StrategyFailed, agreed_preparation, collective_time, equal_steps
from padbench.worker.jobs.padding.row_figures import group_totals, measured_fields, rate_fields, recompile_reason
from padbench.worker.jobs.padding.setup import JobSetup
from padbench.worker.jobs.padding.training_checks import check_training_loss, step_split
from padbench.worker.jobs.padding.warmups import row_warmup, with_every_shape
from padbench.worker.runtime.energy import energy_window, summed
from padbench.worker.runtime.gpu_activity import sample_gpu_activity
from padbench.worker.runtime.memory import track_peak_memory
from padbench.worker.runtime.messages import failed_row_line
from padbench.worker.runtime.progress import ProgressFn

FAILURE_LIMIT = 500  # characters of a failed row's error
OOM_FAILURE_LIMIT = 1000  # an out-of-memory row's: the allocator's sentences and the settings that would fit


MeasuredFn = Callable[[StrategyResult], None]


class StrategyRun:
    """`on_measured` gets the row as soon as its measurement ends, before the phases timed after it (a training
    row's step split, the collectives' profile): a job stopped in those phases keeps the measured figures."""

    def __init__(self, job: JobSetup, strategy: StrategySpec, progress: ProgressFn, tiers: Tiers | None = None,
                 on_measured: MeasuredFn | None = None) -> None:
        self.job, self.strategy, self.progress, self.on_measured = job, strategy, progress, on_measured
        self.attention = job.spec.attention_for(strategy)
        batch_size = job.spec.batch_size_for(strategy)
        if isinstance(batch_size, str):  # run_padding_job probes `auto` and `auto:N` before any strategy runs
            raise ValueError(f"batch_size {batch_size} ({strategy.label}) was not resolved by the OOM probe")
        self.batch_size = batch_size
        self.tiers = tiers  # `auto:N` on a strategy that batches by length: a batch size per length tier
        self.plugin = STRATEGIES.get(strategy.name)
        self.kernel_name: str = self.attention  # replaced by what actually runs once it is resolved
        self.experts: str | None = None  # mixtures of experts: the implementation that ran, once chosen
        self.expert_load: ExpertLoad | None = None
        self.gate: GateResult | None = None
        self.gqa: GqaHandling | None = None  # set once the kernel is known, for models with fewer K/V heads
        self.graphs_after_warmup: int | None = None
        self.batches_left_out = 0  # this rank's part of steps too small for every rank (see dealing, equal_steps)
        self.energy: EnergyUse | None = None  # over the measured repeats, every rank's GPU summed; None: not measured
        self.compiler = RowCompiler(job.model, job.spec.mode)
        self.compilation: CompileReport | None = None  # set once the row's step is built

    def say(self, fraction: float, message: str) -> None:
        self.progress(fraction, f"{self.strategy.label} / {self.kernel_name}: {message}")

    def run(self) -> StrategyResult:
        try:
            return self._measure_strategy()
        except StrategyFailed as error:  # every rank decided it alike (see rank_steps): this strategy only
            message = str(error)
        except Exception as error:  # OOM, an unavailable kernel: this strategy only, on one process
            hinted = with_fitting_settings(error, self.job.spec, self.strategy, self.batch_size, self.job.ranks.world,
                                           self.job.device)
            if self.job.ranks.spread:  # the other ranks wait in a collective: the whole job ends, naming the rank
                if hinted is error:
                    raise
                raise hinted from error
            message = failed_row_line(f"{self.strategy.label} / {self.kernel_name}", hinted,
                                      OOM_FAILURE_LIMIT if hinted is not error else FAILURE_LIMIT)
        finally:  # the next row starts from the eager model, compiling its own kernel if it does; a failed row too
            self.compiler.undo()
        self.job.model.eval()
        return self._result(status="failed", error=message)

    # --- the steps, in order ---------------------------------------------------------------------------------

    def _measure_strategy(self) -> StrategyResult:
        kernel, host_batches, warmup = agreed_preparation(self.job.ranks, self._prepare)
        settings = self._settings()
        device_batches = [self._to_device(kernel, batch) for batch in host_batches]
        self.expert_load = count_expert_load(self.job.model, self._forward(kernel), device_batches, self.job.ranks)
        # Whether to compile is decided on steps of its own, outside the peaks: the row's peak is its measured
        # configuration's. The batches (and a training step's optimizer state) stay resident, so the peaks,
        # reset at the block's start to what is allocated then, still count them.
        step = self._step(kernel, host_batches, device_batches, warmup)
        if self.compilation is not None and self.compilation.compiled:
            warmup = with_every_shape(warmup, host_batches, settings, self.job.ranks)
        with track_peak_memory(self.job.device) as memory:
            self.say(0.2, f"warm-up ({len(warmup)} batches)")
            with sample_gpu_activity(self.job.device, allow_contention=settings.allow_contention) as activity, \
                    energy_window(self.job.device) as energy:
                measurement = measure(step, len(device_batches), settings, clock_for(self.job.device),
                                      on_repeat=energy.opening(self._on_repeat), warmup=warmup,
                                      agree=self.job.ranks.all_agree)
                energy.close()
        self.energy = summed(self.job.ranks.gather(energy.reading))  # every rank's GPU, summed
        # The peaks and the activity cover the warm-up and the measurement only, so the row is whole here: it
        # is handed over before the phases timed after it, which may run past a job's time limit.
        measured = partial(self._measured_result, measurement, host_batches, memory[0],
                           activity[0] if activity else None)
        if self.on_measured is not None:
            self.on_measured(measured(None, None))
        collectives, split = None, None
        if settings.diagnostics:
            collectives = collective_time(self.job.ranks, step, len(device_batches), self.job.device)
            split = step_split(self.job, step, len(device_batches))
        del device_batches, step
        self.job.model.eval()
        return measured(collectives, split)

    def _prepare(self) -> tuple[AttentionKernel, list[Batch], list[int]]:
        """Everything before the first timed step: the kernel, the gate, this rank's batches, the warm-up."""
        plugin = self.plugin
        kernel = resolve_kernel(self.attention, plugin.layout, self.job.device, self.job.dtype)
        self.kernel_name = kernel.name
        self._check_model_features(kernel)
        try:
            self.experts = use_experts(self.job.model, self.strategy.experts, self.job.device, self.job.default_experts)
        except ExpertsUnavailable as error:
            raise StrategyFailed(str(error)) from None
        self.say(0.0, f"correctness gate on {len(self.job.sample)} sequences")
        sample = self._build_batches(plugin, list(self.job.sample))
        device_sample = [self._to_device(kernel, batch) for batch in sample]
        self.gate = self._check_correctness(kernel, device_sample)
        if not self.job.ranks.all_agree(self.gate.passed):
            raise StrategyFailed(f"correctness gate: {self.gate.reason or 'failed on another rank'}")
        check_training_loss(self.job, self._forward(kernel), sample[0], device_sample[0])
        self.say(0.1, "building batches")
        ranks = self.job.ranks
        # Every rank builds the whole job's batches alike, then takes its part of each step (see dealing).
        whole = self._build_batches(plugin, list(self.job.data.sequences), rows_per_batch=ranks.world)
        host_batches, dealt_out = dealt_share(whole, ranks.rank, ranks.world)
        host_batches, unequal_out = equal_steps(ranks, host_batches)
        self.batches_left_out = dealt_out + unequal_out
        return kernel, host_batches, row_warmup(kernel, host_batches, self._settings(), self.job.ranks)

    def _check_model_features(self, kernel: AttentionKernel) -> None:
        features = AttentionFeatures.of(self.job.model.config)
        lengths = [len(sequence) for sequence in self.job.data.sequences]  # every rank alike: the whole data
        longest = longest_attention_span(self.plugin, lengths, self.job.spec.data.max_length)
        reason = kernel.unsupported_reason(features, longest)
        if reason is not None:
            raise StrategyFailed(f"kernel {kernel.name} cannot run this model: {reason}")
        if features.grouped:
            self.gqa = kernel.gqa_handling(self.job.device, self.job.dtype)

    def _on_repeat(self, repeat: int) -> None:
        if repeat == 0:  # the warm-up is over: from here on, a new graph means compiling inside the timing
            self.graphs_after_warmup = compiled_graph_count()
        repeats = self.job.spec.measurement.repeats
        self.say(0.3 + 0.7 * repeat / repeats, f"measuring (repeat {repeat + 1}/{repeats})")

    def _check_correctness(self, kernel: AttentionKernel, batches: list[Batch]) -> GateResult:
        forward = self._forward(kernel)
        references, noise = self._gate_references()
        return check_layout(lambda batch: forward(self.job.model, batch), batches, references, self.job.spec.dtype,
                            noise)

    def _gate_references(self) -> tuple[tuple[torch.Tensor, ...], float]:
        """The job's per-sequence references; for a layout whose rows span documents (wrapped), each of its
        rows of the sample run alone as one sequence: that is the function it computes."""
        if not self.plugin.crosses_documents:
            return self.job.references, self.job.reference_noise
        units = self.plugin.gate_units(list(self.job.sample), self.job.spec.data.max_length, self.job.spec.data.seed)
        with autocast_if(self.job.autocast, self.job.device, self.job.dtype):
            return references_with_noise(self.job.model, units, self.job.device)

    def _forward(self, kernel: AttentionKernel) -> KernelForwardFn:
        if self.job.autocast:
            return autocast_forward(kernel.forward, self.job.device, self.job.dtype)
        return kernel.forward

    def _build_batches(self, plugin: Strategy, sequences: list[list[int]], rows_per_batch: int = 1) -> list[Batch]:
        """The layout's batches of `sequences`; a padded layout's hold `rows_per_batch` times the batch size
        (a step's rows for every rank, dealt afterwards), a pack is always one rank's."""
        max_length, pad, seed = self.job.spec.data.max_length, self.job.data.pad_token_id, self.job.spec.data.seed
        times = rows_per_batch if plugin.layout is PaddedBatch else 1
        if self.tiers is not None and isinstance(plugin, TieredStrategy):
            tiers = [(longest, size * times) for longest, size in self.tiers]
            batches = list(plugin.tiered_batches(sequences, self.strategy, tiers, max_length, pad, seed))
        else:
            batches = list(plugin.batches(sequences, self.strategy, self.batch_size * times, max_length, pad, seed))
        if not batches:
            raise StrategyFailed("the strategy produced no batches")
        for batch in batches:
            problem = batch_sanity_error(batch, max_length)
            if problem is not None:
                raise StrategyFailed(f"batch sanity check: {problem}")
        return batches

    def _to_device(self, kernel: AttentionKernel, batch: Batch) -> Batch:
        return kernel.prepare(batch.to(self.job.device), AttentionFeatures.of(self.job.model.config).layer_windows)

    def _settings(self) -> MeasurementSpec:
        settings = self.job.spec.measurement
        if self.job.spec.compile and settings.warmup_batches == 0:
            # Compilation happens on the first call; it must land in the warm-up, never in the measurement.
            return settings.model_copy(update={"warmup_batches": 1})
        return settings

    def _step(self, kernel: AttentionKernel, host_batches: list[Batch], device_batches: list[Batch],
              warmup: list[int]) -> StepFn:
        """The step the row measures: eager or compiled, as `compile` and (for `auto`) timed steps decide."""
        forward = self._forward(kernel)
        build: Callable[[torch.nn.Module], StepFn]
        if self.job.spec.mode == "inference":
            def build(model: torch.nn.Module) -> StepFn:
                return inference_step(model, forward, device_batches)
        else:
            labels = [next_token_labels(batch).to(self.job.device) for batch in host_batches]
            self.job.model.train()  # the benchmark model has no dropout; train() only enables autograd paths
            optimizer = make_optimizer(self.job.model)  # layers compile in place: one optimizer serves both ways

            def build(model: torch.nn.Module) -> StepFn:
                return training_step(model, forward, device_batches, labels, optimizer, self.job.loss)
        tokens_per_step = sum(batch.real_tokens for batch in host_batches) / max(len(host_batches), 1)
        row = RowSettings(self.job.spec.horizon, tokens_per_step)
        step, self.compilation = choose_compiled_step(self.job.spec.compile, self.compiler, build, warmup or [0], row,
                                                      self.job.device, self.job.ranks)
        return step

    # --- results -------------------------------------------------------------------------------------------

    def _result(self, **fields: object) -> StrategyResult:
        gate = self.gate
        return StrategyResult(
            strategy=self.strategy.name, n_bins=self.strategy.n_bins,
            pad_to_multiple_of=self.strategy.pad_to_multiple_of, crosses_documents=self.plugin.crosses_documents,
            attention=self.attention, kernel=self.kernel_name, batch_size=self.batch_size, gqa=self.gqa,
            experts=self.experts, expert_load=self.expert_load,
            max_logit_error=gate.max_error if gate else None, logit_tolerance=gate.tolerance if gate else None,
            correctness_passed=gate.passed if gate else None, compilation=self.compilation, **fields)  # type: ignore[arg-type]

    def _measured_result(self, measurement: Measurement, batches: list[Batch], memory: MemoryStats,
                         activity: GpuActivity | None, collectives: CollectiveTime | None,
                         split: StepSplit | None) -> StrategyResult:
        group, totals = group_totals(self.job, measurement, batches, memory.peak_allocated_bytes, collectives,
                                     self.batches_left_out)
        common = measured_fields(group, totals, memory, activity, split, self.energy)
        reason = invalid_reason(group.measurement, self.job.spec.measurement) or recompile_reason(
            self.graphs_after_warmup)
        if reason is not None:
            return self._result(status="invalid", invalid_reason=reason, **common)
        return self._result(status="ok", **rate_fields(self.job, group, totals), **common)
