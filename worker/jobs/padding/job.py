"""A padding job from spec to result: data and model once, then each strategy gated, measured and reported.

Every strategy sees the same drawn sequences (same seed, same truncation), the same model weights and the
same measurement rules (padbench.worker.engine.measure.timing). A strategy that cannot run — its kernel is
unavailable, its layout fails the correctness gate, a batch fails the sanity check, or it runs out of memory —
is reported as failed with the reason, and the job goes on with the next one.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from transformers import PreTrainedModel

from padbench.contract.experts import dense_model_experts_problem
from padbench.contract.parallel import Parallelism, ParallelRun
from padbench.contract.results import Environment, PartialResult
from padbench.contract.spec import DataSpec
from padbench.contract.training import AutoCheckpointing, RunPrecision, TrainingRun, precision_run
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.worker.engine.data.sources import SYNTHETIC, load_sequences
from padbench.worker.engine.measure.correctness import gate_sample, references_with_noise
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.engine.model import flops
from padbench.worker.engine.model.build import build_model, model_config
from padbench.worker.engine.model.experts import experts_implementation, is_mixture_of_experts
from padbench.worker.engine.model.parameter_count import active_parameter_count, parameter_count
from padbench.worker.engine.parallel.interconnect import with_links
from padbench.worker.engine.parallel.ranks import ONE_RANK, Backend, Ranks
from padbench.worker.engine.parallel.sharding import (
    Sharding,
    autocast_if,
    build_sharded,
    shard_model,
    sharding_held,
    snapshot_weights,
)
from padbench.worker.engine.parallel.sharding import restore_weights as restore_model_weights
from padbench.worker.engine.training.features import AppliedTraining, apply_training, check_training
from padbench.worker.jobs.padding.auto_batch import (
    AutoSizes,
    attach_probe_reports,
    expand_axes,
    needs_probe,
    probe_auto_batch_sizes,
    unprobed_result,
)
from padbench.worker.jobs.padding.auto_checkpointing import decide_checkpointing
from padbench.worker.jobs.padding.fit import check_model_fits, inference_parallelism, whole_copy_fits
from padbench.worker.jobs.padding.probe.trials import RankProbing
from padbench.worker.jobs.padding.rank_steps import rank_device
from padbench.worker.jobs.padding.setup import JobSetup
from padbench.worker.jobs.padding.strategy_run import StrategyRun
from padbench.worker.runtime.device import resolve_device, torch_dtype
from padbench.worker.runtime.environment import collect_environment, gpu_topology
from padbench.worker.runtime.gpu_activity import read_gpu_clocks
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.runtime.peaks import peak_flops
from padbench.worker.runtime.progress import ProgressFn, progress_span

# Files by which a model directory holds its tokenizer (fast or slow, as transformers writes them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")
# Shares of the progress bar: the rest is split evenly between the strategies.
MODEL_SHARE, DATA_SHARE, REFERENCE_SHARE = 0.02, 0.10, 0.03
# The OOM probe's share of the whole bar when the job has `auto` sizes (it runs before everything else).
PROBE_SHARE = 0.3


def prepare_job(spec: PaddingJobSpec, progress: ProgressFn, ranks: Ranks = ONE_RANK) -> JobSetup:
    device, dtype = ranks.device(resolve_device(spec.device)), torch_dtype(spec.dtype)
    precision = training_precision(spec, ranks)
    parallelism = choose_parallelism(spec, ranks, device)
    progress(0.0, f"building the model on {device}")
    model = build_job_model(spec, device, precision, parallelism, ranks)
    applied = AppliedTraining.of(model, spec.training, precision) if spec.mode == "training" else None
    progress(MODEL_SHARE, f"loading data from {spec.data.source}")
    data = load_sequences(data_with_tokenizer(spec), model.config.vocab_size,
                          progress=progress_span(progress, MODEL_SHARE, MODEL_SHARE + DATA_SHARE))
    if not data.sequences:
        raise ValueError(f"data.source {spec.data.source!r}: no sequences to measure")
    chosen = gate_sample([len(s) for s in data.sequences], spec.measurement.correctness_samples)
    sample = tuple(data.sequences[index] for index in chosen)
    progress(MODEL_SHARE + DATA_SHARE, f"reference logits for {len(sample)} sequences, one at a time")
    with autocast_if(precision == "amp" and parallelism == "single", device, dtype):
        references, noise_floor = references_with_noise(model, sample, device)
    peak, peak_source = peak_flops(device, dtype)
    matmul_flops = None
    if device.type == "cuda":  # a CPU has no MFU worth stating: no datasheet peak, and GEMM rates vary with size
        progress(MODEL_SHARE + DATA_SHARE, "timing the device's matmul rate")
        matmul_flops = measure_matmul_tflops(device, dtype) * 1e12
    initial_state = snapshot_weights(model) if spec.mode == "training" else None
    return JobSetup(spec, device, dtype, model, data, sample, references, noise_floor, peak, peak_source, matmul_flops,
                    initial_state, ranks=ranks, precision=precision,
                    parallelism=parallelism, applied_training=applied, default_experts=experts_implementation(model))


def build_job_model(spec: PaddingJobSpec, device: torch.device, precision: RunPrecision, parallelism: Parallelism,
                    ranks: Ranks) -> PreTrainedModel:
    """The job's model on this rank: whole, or sharded over the ranks; built whole first (as one process builds
    it, so the ranks start from the same weights) when a whole copy fits the GPU, else sharded from shapes.
    A training job's adapters, float8 layers and checkpointing are applied before sharding."""
    weights_dtype = torch.float32 if precision == "amp" else torch_dtype(spec.dtype)
    compute_dtype = torch_dtype(spec.dtype) if precision == "amp" else None
    sharding = Sharding.of(spec.distributed, spec.mode)

    def change(model: PreTrainedModel) -> None:
        if spec.mode == "training":
            apply_training(model, spec.training, precision, device, torch_dtype(spec.dtype))

    if parallelism == "sharded" and not whole_copy_fits(spec, device, weights_dtype):
        return build_sharded(spec.model, weights_dtype, device, spec.data.seed, ranks, compute_dtype, change,
                             sharding)
    model = build_model(spec.model, weights_dtype, device, seed=spec.data.seed)
    change(model)
    if parallelism == "sharded":
        shard_model(model, ranks, device, compute_dtype=compute_dtype, sharding=sharding)
    return model


def training_precision(spec: PaddingJobSpec, ranks: Ranks) -> RunPrecision:
    """What the weights are kept in: the training precision as it resolves on this many ranks; inference keeps
    them in the job's dtype."""
    return precision_run(spec.training.precision, spec.dtype, ranks.world) if spec.mode == "training" else spec.dtype


def choose_parallelism(spec: PaddingJobSpec, ranks: Ranks, device: torch.device) -> Parallelism:
    """Training on several ranks shards the model; inference replicates it unless asked to shard, or unless
    its weights would not fit one GPU."""
    if not ranks.spread:
        return "single"
    return "sharded" if spec.mode == "training" else inference_parallelism(spec, device, ranks.world)


def job_lengths(spec: PaddingJobSpec) -> list[int]:
    """The token length of every sequence the job measures, read before its model is built (for `auto:N`)."""
    data = load_sequences(data_with_tokenizer(spec), model_config(spec.model).vocab_size)
    return [len(sequence) for sequence in data.sequences]


def data_with_tokenizer(spec: PaddingJobSpec) -> DataSpec:
    """The data spec with its tokenizer: the one named, else the Hub model's or the model directory's own."""
    if spec.data.tokenizer is not None or spec.data.source == SYNTHETIC:
        return spec.data
    if spec.model.hub is not None:
        return spec.data.model_copy(update={"tokenizer": spec.model.hub})
    if spec.model.path is None:
        return spec.data
    if not any((Path(spec.model.path) / name).is_file() for name in TOKENIZER_FILES):
        raise ValueError(f"data.tokenizer is not set and model.path {spec.model.path!r} holds no tokenizer files "
                         f"({', '.join(TOKENIZER_FILES)})")
    return spec.data.model_copy(update={"tokenizer": spec.model.path})


def restore_weights(job: JobSetup) -> None:
    """Training steps move the weights; every strategy starts from the same ones the reference used."""
    if job.initial_state is not None:
        restore_model_weights(job.model, job.initial_state)


def release_device_memory(device: torch.device) -> None:
    """Give the next strategy the whole device: collect reference cycles, then return cached blocks.

    Only on CUDA: on the CPU freed memory is returned at once, and a full collection costs ~0.5 s.
    """
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()


def with_speedups(results: Sequence[StrategyResult]) -> list[StrategyResult]:
    """Speed-up vs static, only where a valid static measurement exists in the same job.

    With several static rows (one per attention choice, experts' implementation or batch size), a row compares
    with the fastest static row of the same requested attention and experts when there is one, else with the
    fastest valid static row.
    """
    statics: dict[tuple[str, str | None], float] = {}
    for row in results:  # with a list of batch sizes, a static row per size: compare with the fastest
        if row.strategy == "static" and row.tokens_per_s:
            key = (row.attention, row.experts)
            statics[key] = max(row.tokens_per_s, statics.get(key, 0.0))
    if not statics:
        return list(results)
    fastest = max(statics.values())
    return [result.model_copy(update={
        "speedup_vs_static": result.tokens_per_s / statics.get((result.attention, result.experts), fastest)
        if result.tokens_per_s else None}) for result in results]


def flops_per_token(job: JobSetup) -> float:
    """Matmul FLOPs per computed token (attention's share depends on the lengths, so it is per batch)."""
    return float(flops.ModelShape.of(job.model).matmul_flops_per_token * job.flop_factor)


def run_padding_job(spec: PaddingJobSpec, progress: ProgressFn,
                    on_partial: Callable[[PaddingResult], None] | None = None) -> PaddingResult:
    """The job's result; after each strategy row, `on_partial` gets the rows so far, marked partial, so that
    a job stopped before its end keeps them; and once more as soon as a row's measurement ends, before the
    phases timed after it (see `StrategyRun`)."""
    # A list of batch sizes becomes one strategy per size. `batch_size: auto` is probed first, in child
    # processes, before this job's model is on the device; `sizes.spec` has the probed sizes; reports go
    # beside their results, failed probes fail their row only. A model that cannot fit fails before all that.
    ranks = Ranks.of_environment()
    device = ranks.device(resolve_device(spec.device))
    backend = ranks.join(device, spec.distributed.collective_timeout_s)
    # Every rank runs rank 0's spec: each settled `attention: auto` from the kernel speeds table as it read it,
    # and a job that ended between two ranks' reads must not have them run different kernels.
    spec = ranks.gather(spec)[0]
    if spec.mode == "training":  # before the probe and the build: a feature that cannot run fails the job at once
        check_training(spec.training, device, ranks.world)
    check_model_fits(spec, device, ranks.world)
    check_experts_named(spec)
    expanded = expand_axes(spec)
    deciding = spec.mode == "training" and spec.training.activation_checkpointing == "auto"
    probe_end = PROBE_SHARE if needs_probe(expanded) or deciding else 0.0
    group = None if not ranks.spread else RankProbing(
        ranks, training_precision(spec, ranks), choose_parallelism(spec, ranks, device) == "sharded",
        backend or "gloo", spec.distributed.collective_timeout_s)
    expanded, recompute = decide_checkpointing(expanded, device, progress_span(progress, 0.0, probe_end), group)
    sizes = probe_auto_batch_sizes(expanded, device, progress_span(progress, 0.0, probe_end), group,
                                   lengths=lambda: job_lengths(spec))
    measured = sizes.spec
    progress = progress_span(progress, probe_end, 1.0)
    setup_end = MODEL_SHARE + DATA_SHARE + REFERENCE_SHARE
    job = prepare_job(measured, progress, ranks)
    parallel = with_links(parallel_run(job, backend), ranks, job.device, backend)
    clocks_at_start = read_gpu_clocks(job.device)
    environment = collect_environment(
        job.device, dataset_digest=job.data.digest, peak_flops=job.peak_flops, peak_source=job.peak_source,
        seeds={"data": spec.data.seed, "model_init": spec.data.seed, "strategy_order": spec.data.seed})
    environment = environment.model_copy(update={"clocks_at_start": clocks_at_start})
    planned = len(measured.strategies)
    share = (1.0 - setup_end) / planned
    results: list[StrategyResult] = []

    def hand_over(rows: list[StrategyResult], measured_only: bool = False) -> None:
        if on_partial is not None:
            partial = PartialResult(rows_finished=len(rows), rows_planned=planned,
                                    last_row_measured_only=measured_only)
            on_partial(assemble_result(spec, environment, job, rows, sizes, partial, parallel, recompute))

    for number, strategy in enumerate(measured.strategies):
        restore_weights(job)
        span = progress_span(progress, setup_end + number * share, setup_end + (number + 1) * share)
        if number in sizes.failures:
            results.append(unprobed_result(measured, strategy, sizes.failures[number]))
        else:
            results.append(StrategyRun(job, strategy, span, sizes.tiers_of(number),
                                       on_measured=lambda row: hand_over([*results, row], measured_only=True)).run())
            release_device_memory(job.device)
        hand_over(results)
    progress(1.0, "done")
    return assemble_result(spec, environment, job, results, sizes, None, parallel, recompute)


def check_experts_named(spec: PaddingJobSpec) -> None:
    """`experts` is refused on a dense model before anything is built (a preset is refused at submission)."""
    if spec.experts is None and not any(strategy.experts for strategy in spec.strategies):
        return
    if not is_mixture_of_experts(model_config(spec.model)):
        raise SpecProblem(f"experts: {dense_model_experts_problem(spec.model.label)}")


def training_run(job: JobSetup, recompute: AutoCheckpointing | None = None) -> TrainingRun | None:
    """How a training job trained, as the result states it (None for inference), with how `auto` chose the
    recompute where the spec asked it."""
    if job.applied_training is None or job.loss_name is None:
        return None
    return job.applied_training.run(job.loss_name).model_copy(update={"auto_checkpointing": recompute})


def parallel_run(job: JobSetup, backend: Backend | None) -> ParallelRun | None:
    """How a job on several ranks spread its work (every rank takes part: the devices are gathered)."""
    devices = job.ranks.gather(rank_device(job.device))
    if not job.ranks.spread:
        return None
    held = sharding_held(job.model)
    return ParallelRun(gpus=job.ranks.world, parallelism=job.parallelism, precision=job.precision, backend=backend,
                       devices=devices, topology=gpu_topology() if job.device.type == "cuda" else None,
                       reshard_after_forward=None if held is None else held.reshard_after_forward,
                       prefetch=None if held is None else held.prefetch)


def assemble_result(spec: PaddingJobSpec, environment: Environment, job: JobSetup, rows: Sequence[StrategyResult],
                    sizes: AutoSizes, partial: PartialResult | None, parallel: ParallelRun | None = None,
                    recompute: AutoCheckpointing | None = None) -> PaddingResult:
    """The result document for the strategy rows finished so far (all of them unless `partial` says not)."""
    lengths = [len(sequence) for sequence in job.data.sequences]
    return PaddingResult(
        spec=spec, environment=environment.model_copy(update={"clocks_at_end": read_gpu_clocks(job.device)}),
        model_parameters=parameter_count(job.model), active_parameters=active_parameter_count(job.model),
        flops_per_token=flops_per_token(job),
        matmul_tflops=job.matmul_flops / 1e12 if job.matmul_flops else None,
        num_sequences=len(lengths), real_tokens_total=sum(lengths), parallel=parallel,
        training=training_run(job, recompute),
        strategies=attach_probe_reports(with_speedups(rows), sizes), partial=partial)
