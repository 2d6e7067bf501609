"""One strategy row of a generate job: kernel, gate, warm-up, measured passes, figures.

The order is the method, as for padding rows: the correctness gate runs before anything is timed; CUDA
graphs are captured and kernels compiled in the warm-up pass, never in a measured one; every measured pass
serves every request once, so repeats compare like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from padbench.contract.results import EnergyUse, GpuActivity, MemoryStats
from padbench.kinds.generate.contract import GenerateJobSpec, GenerateRow
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.decoding.cache import CacheShape, KvCache, TokenBuckets
from padbench.worker.engine.decoding.decoder import Decoder
from padbench.worker.engine.decoding.fused import SharedWeights, fused_projections
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.decoding.registry import resolve_decode_kernel
from padbench.worker.engine.decoding.split_k import BLOCK_M
from padbench.worker.engine.measure.spread import repeat_spread
from padbench.worker.engine.model.build import config_of
from padbench.worker.jobs.generate.figures import ModelCosts, repeat_rates, row_figures
from padbench.worker.jobs.generate.gate import GateOutcome, ReferenceRun, judge
from padbench.worker.jobs.generate.passes import PassTiming, run_pass
from padbench.worker.jobs.generate.schedule import Request, Scheduler
from padbench.worker.jobs.generate.strategies import GENERATE_STRATEGIES
from padbench.worker.runtime.energy import energy_window
from padbench.worker.runtime.gpu_activity import sample_gpu_activity
from padbench.worker.runtime.memory import track_peak_memory
from padbench.worker.runtime.messages import failed_row_line
from padbench.worker.runtime.progress import ProgressFn

FAILURE_LIMIT = 500


@dataclass(frozen=True)
class GenerateSetup:
    """What every row of a job shares."""

    spec: GenerateJobSpec
    device: torch.device
    dtype: torch.dtype
    model: torch.nn.Module
    requests: tuple[Request, ...]
    pad_id: int
    data_digest: str
    gate_requests: tuple[Request, ...]
    references: dict[int, ReferenceRun]
    costs: ModelCosts
    fusable: SharedWeights  # the model's projections that the strategy rows run fused


class RowFailed(Exception):
    """A reason this row cannot be measured; the job goes on with the next one."""


class StrategyRow:
    def __init__(self, job: GenerateSetup, strategy: str, requests: Sequence[Request],
                 context: int | None, progress: ProgressFn) -> None:
        self.job, self.strategy, self.requests, self.context = job, strategy, list(requests), context
        self.progress = progress
        self.kernel_name: str = job.spec.attention
        self.gate: GateOutcome | None = None
        self.graphs: bool | None = None
        self.energy: EnergyUse | None = None  # over the measured passes; None on CPU or without NVML
        self.compiled: bool | None = None
        self.compile_seconds: float | None = None
        self.capture_seconds: float | None = None
        self.kv_cache_bytes: int | None = None
        self.slots = self._slots()

    def _slots(self) -> int:
        size = self.job.spec.batch_size
        if size == "auto":
            raise ValueError("batch_size auto was not resolved by the OOM probe before the rows ran")
        return size

    def say(self, fraction: float, message: str) -> None:
        where = f" @ {self.context}" if self.context else ""
        self.progress(fraction, f"{self.strategy}{where} / {self.kernel_name}: {message}")

    def run(self) -> GenerateRow:
        try:
            with fused_projections(self.job.model, self.job.fusable):
                return self._measure()
        except Exception as error:  # an unavailable kernel, a failed gate, out of memory: this row only
            message = str(error) if isinstance(error, RowFailed) else \
                failed_row_line(f"{self.strategy} / {self.kernel_name}", error, FAILURE_LIMIT)
        return self._row(status="failed", error=message[:FAILURE_LIMIT])

    def _measure(self) -> GenerateRow:
        kernel = resolve_decode_kernel(self.job.spec.attention, self.job.device, self.job.dtype)
        self.kernel_name = kernel.name
        features = AttentionFeatures.of(config_of(self.job.model))
        reason = kernel.unsupported_reason(features.softcap, features.sinks)
        if reason is not None:
            raise RowFailed(f"kernel {kernel.name} cannot run this model: {reason}")
        self.tune_products(kernel)
        self.say(0.0, f"correctness gate on {len(self.job.gate_requests)} requests")
        self.gate = self._check(kernel)
        if not self.gate.passed:
            raise RowFailed(f"correctness gate: {self.gate.detail}")
        settings = self.job.spec.measurement
        with track_peak_memory(self.job.device) as memory:
            decoder, scheduler = self.engine(kernel, self.requests, self.slots)
            self.graphs, self.kv_cache_bytes = decoder.use_graphs, decoder.cache.nbytes
            warmup = self.requests[:settings.warmup_requests]
            self.say(0.1, f"warm-up ({len(warmup)} requests)")
            warmup_seconds = run_pass(self.strategy, scheduler, decoder, warmup, self.job.device).seconds \
                if warmup else 0.0
            self.compiled, self.compile_seconds = decoder.compile_decode, decoder.compile_seconds
            self.capture_seconds = decoder.capture_seconds
            with sample_gpu_activity(self.job.device, allow_contention=settings.allow_contention) as activity, \
                    energy_window(self.job.device) as energy:
                energy.open()  # after the warm-up: the energy is the measured passes' alone
                passes = []
                for repeat in range(settings.repeats):
                    self.say(0.2 + 0.8 * repeat / settings.repeats, f"measuring (pass {repeat + 1}/{settings.repeats})")
                    decoder.reset()
                    passes.append(run_pass(self.strategy, scheduler, decoder, self.requests, self.job.device))
                energy.close()
            del decoder
        self.energy = energy.reading
        return self._measured(passes, warmup_seconds, memory[0], activity[0] if activity else None)

    def tune_products(self, kernel: DecodeKernel) -> None:
        """Where decode steps run as compiled graphs, times the decode products on cuBLAS and split-K, once per
        job and before anything compiles: the gate then checks the products the rows are measured with."""
        spec, products = self.job.spec, self.job.fusable.products
        if products.tuned or not spec.compile or not Decoder.graphs_possible(kernel, self.job.device, spec.cuda_graphs):
            return
        self.say(0.0, "timing the decode step's products on cuBLAS and split-K")
        products.tune(self.job.fusable.product_weights(), min(self.slots, BLOCK_M))

    def engine(self, kernel: DecodeKernel, requests: Sequence[Request], slots: int) -> tuple[Decoder, Scheduler]:
        longest_prompt = max(len(r.prompt) for r in requests)
        longest_output = max(r.output_length for r in requests)
        capacity = longest_prompt + longest_output + 1
        spec, model = self.job.spec, self.job.model
        # Steps with prefills beside decodes replay graphs of a few token counts where they can.
        buckets = TokenBuckets() if GENERATE_STRATEGIES.get(self.strategy).prefills_beside_decodes and \
            Decoder.replays_prefills(kernel, self.job.device, spec.cuda_graphs) else None
        cache = KvCache(CacheShape.of(config_of(model)), slots, capacity, self.job.device, self.job.dtype,
                        scratch=buckets.step if buckets else 0)
        rows = max(r.row for r in requests) + 1
        decoder = Decoder(model, kernel, cache, rows, longest_output, self.job.device, spec.cuda_graphs, spec.compile)
        if buckets is not None:
            decoder.capture_buckets(buckets, longest_prompt)
        return decoder, Scheduler(slots, capacity, self.job.pad_id, rows, longest_output, buckets)

    def _check(self, kernel: DecodeKernel) -> GateOutcome:
        requests = self.job.gate_requests
        # Fewer slots than gate requests, so that continuous batching refills slots inside the gate too.
        slots = min(self.slots, max(2, len(requests) // 2))
        decoder, scheduler = self.engine(kernel, requests, slots)
        decoder.keep_first_logits = True
        run_pass(self.strategy, scheduler, decoder, requests, self.job.device)
        return judge(requests, self.job.references, decoder.generated, decoder.first_logits, self.job.spec.dtype)

    # --- the row ---------------------------------------------------------------------------------------

    def _row(self, **fields: object) -> GenerateRow:
        gate = self.gate
        return GenerateRow(
            strategy=self.strategy, attention=self.job.spec.attention, kernel=self.kernel_name, context=self.context,
            batch_size=self.slots, cuda_graphs=self.graphs, compiled=self.compiled,
            compile_seconds=self.compile_seconds, capture_seconds=self.capture_seconds,
            fused_layers=self.job.fusable.layers, split_k_products=list(self.job.fusable.products.choices) or None,
            kv_cache_bytes=self.kv_cache_bytes,
            correctness_passed=gate.passed if gate else None,
            gate_requests=len(self.job.gate_requests) if gate else None, gate_detail=gate.detail if gate else None,
            max_logit_error=gate.max_error if gate else None, logit_tolerance=gate.tolerance if gate else None,
            **fields)  # type: ignore[arg-type]

    def _measured(self, passes: list[PassTiming], warmup_seconds: float, memory: MemoryStats,
                  activity: GpuActivity | None) -> GenerateRow:
        figures = row_figures(passes, self.requests, self.job.costs)
        rates = repeat_rates(passes, self.requests)
        spread = repeat_spread(rates, self.job.spec.measurement.noise_cv)
        output = sum(request.output_length for request in self.requests) * len(passes)  # every pass serves them all
        energy = None if self.energy is None else self.energy.model_copy(update={"tokens": output or None})
        common = {**figures, "warmup_seconds": warmup_seconds, "memory": memory, "gpu_activity": activity,
                  "energy": energy}
        if figures["output_tokens_per_s"] is None:
            return self._row(status="invalid", invalid_reason="the timer measured no time", **common)
        return self._row(status="ok", repeat_tokens_per_s=rates, spread=spread, **common)
