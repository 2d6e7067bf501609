"""A generate job from spec to result: model and requests once, then every row gated, measured and reported.

Rows: each strategy on the data's prompts; with `context`, each strategy again at each context length;
then the references (transformers' own loops) on the data's prompts. A row that cannot run is failed with
its reason and the job goes on.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

import torch

from padbench.contract.results import Environment, PartialResult
from padbench.kinds.generate.contract import GenerateJobSpec, GenerateResult, GenerateRow
from padbench.worker.engine.decoding.cache import CacheShape
from padbench.worker.engine.decoding.fused import SharedWeights, share_fused_weights
from padbench.worker.engine.measure.copy_rate import measure_copy_bytes_per_s
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.engine.model import flops
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.jobs.generate.figures import ModelCosts
from padbench.worker.jobs.generate.gate import gate_requests, reference_runs
from padbench.worker.jobs.generate.references import reference_row
from padbench.worker.jobs.generate.requests import context_requests, load_requests
from padbench.worker.jobs.generate.row import GenerateSetup, StrategyRow
from padbench.worker.jobs.generate.sizing.probe import SizedSpec, size_batch
from padbench.worker.jobs.padding.job import data_with_tokenizer
from padbench.worker.runtime.device import resolve_device, torch_dtype
from padbench.worker.runtime.environment import collect_environment
from padbench.worker.runtime.gpu_activity import read_gpu_clocks
from padbench.worker.runtime.peaks import peak_flops
from padbench.worker.runtime.progress import ProgressFn, progress_span

SETUP_SHARE = 0.1
PROBE_SHARE = 0.05  # of the bar, within the set-up's share, when `batch_size: auto` is probed


def model_costs(model: torch.nn.Module, dtype: torch.dtype, device: torch.device,
                peak: float | None) -> ModelCosts:
    config = config_of(model)
    shape = flops.ModelShape.of(model)
    head = model.get_output_embeddings()  # type: ignore[operator]
    head_macs = int(head.weight.numel()) if head is not None else 0
    unique = {parameter.data_ptr(): parameter for parameter in model.parameters()}
    on_cuda = device.type == "cuda"
    return ModelCosts(
        weight_bytes=sum(p.numel() * p.element_size() for p in unique.values()),
        kv_bytes_per_token=CacheShape.of(config).bytes_per_token(dtype),
        body_flops_per_token=2 * (shape.matmul_macs_per_token - head_macs), head_flops_per_logit=2 * head_macs,
        attention_flops_per_key=4 * shape.attention_width * shape.n_layer,
        copy_bytes_per_s=measure_copy_bytes_per_s(device),
        matmul_flops=measure_matmul_tflops(device, dtype) * 1e12 if on_cuda else None, peak_flops=peak)


def prepare(spec: GenerateJobSpec, progress: ProgressFn) -> GenerateSetup:
    device, dtype = resolve_device(spec.device), torch_dtype(spec.dtype)
    progress(0.0, f"building the model on {device}")
    model = build_model(spec.model, dtype, device, seed=spec.data.seed)
    progress(0.02, f"loading prompts from {spec.data.source}")
    data = data_with_tokenizer(spec)  # type: ignore[arg-type]
    vocabulary = int(config_of(model).vocab_size)
    requests, digest, pad_id = load_requests(spec, data, vocabulary, progress_span(progress, 0.02, 0.06))
    sample = gate_requests(requests, spec.measurement.correctness_samples, spec.measurement.correctness_tokens)
    progress(0.06, f"one-at-a-time reference for {len(sample)} requests")
    references = reference_runs(model, sample, device, spec.dtype)
    progress(0.08, "timing the device's copy bandwidth and matmul rate")
    peak, _ = peak_flops(device, dtype)
    costs = model_costs(model, dtype, device, peak)
    # Concatenated after the model's costs are read (every parameter still once) and before any row runs.
    fusable = share_fused_weights(model) if spec.fuse_projections else SharedWeights(())
    return GenerateSetup(spec, device, dtype, model, tuple(requests), pad_id, digest, tuple(sample), references, costs,
                         fusable)


def planned_rows(spec: GenerateJobSpec) -> list[tuple[str, int | None]]:
    rows: list[tuple[str, int | None]] = [(strategy, None) for strategy in spec.strategies]
    rows += [(strategy, context) for context in spec.context or [] for strategy in spec.strategies]
    return rows + [(reference, None) for reference in spec.references]


def run_generate_job(spec: GenerateJobSpec, progress: ProgressFn,
                     on_partial: Callable[[GenerateResult], None] | None = None) -> GenerateResult:
    # `batch_size: auto` is probed first, before this process holds anything of the job on the device.
    probe_end = PROBE_SHARE if spec.batch_size == "auto" else 0.0
    sized = size_batch(spec, progress_span(progress, 0.0, probe_end))
    job = prepare(sized.spec, progress_span(progress, probe_end, SETUP_SHARE))
    environment = collect_environment(job.device, dataset_digest=job.data_digest, peak_flops=job.costs.peak_flops,
                                      peak_source=None, seeds={"data": spec.data.seed, "model_init": spec.data.seed})
    environment = environment.model_copy(update={"clocks_at_start": read_gpu_clocks(job.device)})
    planned = planned_rows(spec)
    share = (1.0 - SETUP_SHARE) / len(planned)
    rows: list[GenerateRow] = []
    for number, (name, context) in enumerate(planned):
        span = progress_span(progress, SETUP_SHARE + number * share, SETUP_SHARE + (number + 1) * share)
        rows.append(sized_row(job, sized, name, context, span))
        release(job.device)
        if on_partial is not None:
            partial = PartialResult(rows_finished=len(rows), rows_planned=len(planned))
            on_partial(assemble(job, environment, rows, partial, spec))
    progress(1.0, "done")
    return assemble(job, environment, rows, None, spec)


def sized_row(job: GenerateSetup, sized: SizedSpec, name: str, context: int | None,
              progress: ProgressFn) -> GenerateRow:
    """A row at the probed size, carrying the probe's report (strategy rows); failed when no size was found."""
    spec = job.spec
    if sized.failure is not None:  # every row needs a size, the references too
        return GenerateRow(strategy=name, reference=name in spec.references, attention=spec.attention,
                           kernel=spec.attention, context=context, status="failed", error=sized.failure)
    row = run_row(job, name, context, progress)
    return row if row.reference else row.model_copy(update={"probe": sized.report})


def run_row(job: GenerateSetup, name: str, context: int | None, progress: ProgressFn) -> GenerateRow:
    spec = job.spec
    slots = spec.batch_size if isinstance(spec.batch_size, int) else 1
    if name in spec.references:
        progress(0.0, f"{name}: measuring")
        return reference_row(name, job.model, job.requests, slots, job.pad_id, job.device,  # type: ignore[arg-type]
                             spec.measurement.repeats, spec.measurement.warmup_requests, spec.measurement.noise_cv)
    requests = job.requests if context is None else context_requests(job.requests, context, slots)
    return StrategyRow(job, name, requests, context, progress).run()


def release(device: torch.device) -> None:
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def with_speedups(rows: Sequence[GenerateRow]) -> list[GenerateRow]:
    """Speed-up vs the fastest static row of the same context length, where one was measured."""
    statics: dict[int | None, float] = {}
    for row in rows:
        if row.strategy == "static" and row.output_tokens_per_s:
            statics[row.context] = max(row.output_tokens_per_s, statics.get(row.context, 0.0))
    return [row.model_copy(update={"speedup_vs_static": row.output_tokens_per_s / statics[row.context]})
            if row.output_tokens_per_s and statics.get(row.context) else row for row in rows]


def assemble(job: GenerateSetup, environment: Environment, rows: Sequence[GenerateRow],
             partial: PartialResult | None, spec: GenerateJobSpec | None = None) -> GenerateResult:
    """The result; `spec` is the job's as submitted (`batch_size: auto` stays auto; the rows say the size)."""
    copy_rate = job.costs.copy_bytes_per_s
    return GenerateResult(
        spec=spec or job.spec,
        environment=environment.model_copy(update={"clocks_at_end": read_gpu_clocks(job.device)}),
        model_parameters=sum(p.numel() for p in job.model.parameters()), weight_bytes=job.costs.weight_bytes,
        kv_bytes_per_token=job.costs.kv_bytes_per_token,
        matmul_tflops=job.costs.matmul_flops / 1e12 if job.costs.matmul_flops else None,
        copy_bandwidth_gbps=copy_rate / 1e9 if copy_rate else None, num_requests=len(job.requests),
        prompt_tokens_total=sum(len(r.prompt) for r in job.requests),
        output_tokens_total=sum(r.output_length for r in job.requests), rows=with_speedups(rows), partial=partial)
