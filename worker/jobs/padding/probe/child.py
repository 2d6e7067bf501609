"""Child-process targets of the OOM probe (run through `run_in_child`, never in the caller).

`probe_size` builds the job's model with the job's dtype, precision, training features (adapters,
float8 layers, activation checkpointing) and kernel, hands it the worst-case batch of
the requested size and runs a few steps — forward passes, or full training steps — then reports the
peak memory. The model's weights are random and unseeded, made on the device itself: their values do not
change the memory a step takes, and a CPU initialisation and copy would cost seconds per probe. Running
out of memory raises, and `run_in_child` classifies that as "oom"; a sticky CUDA error, a crash or a hang
costs only this child.

On CPU the device's memory is replaced by a budget: after the model is built the address space is
capped at baseline + budget (RLIMIT_AS), so an over-budget size fails its allocation exactly as a GPU
runs out, and the peak is read from the kernel's VmPeak for this process.

The probe keeps one child while sizes fit (`ChildSession`), so the model built for the first size serves
the next ones: building it is most of a probe's cost. Between sizes everything of the last one is released
(on CUDA the allocator's cache too, and its peak statistics reset), so each size starts from the model
alone, as in a fresh process; on a GPU the same holds when the child goes on to a job's next strategy,
whose model replaces the last one's (on the CPU every strategy gets a fresh child). Within one strategy the
sizes only grow — the search probes above the largest
fit until something runs out, and running out ends the child — so on CPU the address space's high-water
mark is always the current size's own peak.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import replace
from typing import Literal

import torch
import torch.distributed as dist

from padbench.contract.kernel_families import AttentionName
from padbench.contract.spec import Dtype, StrategyName
from padbench.worker.engine.attention import ATTENTION_KERNELS, AttentionKernel, KernelUnavailable, resolve_kernel
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES, Batch
from padbench.worker.engine.model.build import build_model, config_of
from padbench.worker.engine.model.experts import use_experts
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.parallel.sharding import Sharding, autocast_forward, build_sharded
from padbench.worker.engine.strategies.worst_case import worst_case_batch
from padbench.worker.engine.training.features import apply_training
from padbench.worker.engine.training.loss import resolve_loss
from padbench.worker.engine.training.steps import (
    StepFn,
    inference_step,
    make_optimizer,
    next_token_labels,
    training_step,
)
from padbench.worker.jobs.padding.compiling import RowCompiler
from padbench.worker.jobs.padding.probe.protocol import ProbeGroup, ProbeRequest
from padbench.worker.jobs.probing.child import BuiltModel, ModelKeeper, peak, size_frame, synchronize
from padbench.worker.jobs.probing.protocol import ProbeMeasurement
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.isolation import ChildContext

_MODEL: ModelKeeper[AttentionKernel] = ModelKeeper()


def _built(request: ProbeRequest, device: torch.device) -> BuiltModel[AttentionKernel]:
    def build() -> tuple[AttentionKernel, torch.nn.Module]:
        kernel = _kernel(request.kernel, device, torch_dtype(request.dtype))
        model = probed_model(request, device)
        # Compiled as the job's rows compile it: the whole model for inference, its layers in place for training.
        return kernel, RowCompiler(model, request.mode).compile() if request.compile else model

    return _MODEL.get(replace(request, size=0), device, request.cpu_memory_budget_bytes, build)


def probe_size(ctx: ChildContext, request: ProbeRequest) -> ProbeMeasurement:
    started = time.monotonic()
    device = torch.device(request.device)
    built = _built(request, device)
    kernel, model = built.kernel, built.model
    model.zero_grad(set_to_none=True)  # the last size's gradients, before the frame is read
    frame = size_frame(device, built)
    # Everything from here on counts towards the peak: the batch, masks a kernel precomputes,
    # activations, and in training the gradients and optimizer state.
    layout = STRATEGIES.get(request.strategy).layout
    batch = kernel.prepare(worst_case_batch(layout, request.size, request.max_length, config_of(model).vocab_size)
                           .to(device), AttentionFeatures.of(config_of(model)).layer_windows)
    step = _step(request, model, kernel, batch)
    for number in range(request.passes):
        step(0)
        synchronize(device)
        ctx.progress((number + 1) / request.passes, f"size {request.size}: pass {number + 1} of {request.passes}")
    peak_bytes, peak_allocated = peak(device, frame)
    return ProbeMeasurement(peak_bytes=peak_bytes, peak_allocated_bytes=peak_allocated, capacity_bytes=frame.capacity,
                            baseline_bytes=frame.baseline, kernel=kernel.name, seconds=time.monotonic() - started)


def probed_model(request: ProbeRequest, device: torch.device) -> torch.nn.Module:
    """The model as the job holds it: in its training precision, with its adapters, float8 layers and
    checkpointed layers, and sharded with the other ranks' probe children when the job shards it (built from
    shapes: each child allocates only its shards)."""
    weights = torch.float32 if request.precision == "amp" else torch_dtype(request.dtype)
    compute = torch_dtype(request.dtype) if request.precision == "amp" else None

    def change(model: torch.nn.Module) -> None:
        if request.training is not None:
            apply_training(model, request.training, request.precision, device, torch_dtype(request.dtype))

    if request.group is None:
        model = build_model(request.model, weights, device, request.seed, init="on_device")
        change(model)
    else:
        ranks = join_probe_group(request.group, device)
        model = build_sharded(request.model, weights, device, request.seed, ranks, compute, change,
                              Sharding.of(request.distributed, request.mode))
    use_experts(model, request.experts, device)
    return model


def join_probe_group(group: ProbeGroup, device: torch.device) -> Ranks:
    store = dist.PrefixStore(group.prefix, dist.TCPStore(group.store_host, group.store_port, is_master=False,
                                                         timeout=datetime.timedelta(seconds=group.timeout_s)))
    if device.type == "cuda":  # the child sees only its rank's GPU (see rank_gpu_environment): the first one
        torch.cuda.set_device(device.index or 0)
    dist.init_process_group(group.backend, store=store, rank=group.rank, world_size=group.world,
                            timeout=datetime.timedelta(seconds=group.timeout_s))
    return Ranks(rank=group.rank, world=group.world, local_rank=0)


def _kernel(name: str, device: torch.device, dtype: torch.dtype) -> AttentionKernel:
    kernel = ATTENTION_KERNELS.get(name)
    reason = kernel.unavailable_reason(device, dtype)
    if reason is not None:
        raise KernelUnavailable(name, reason)
    return kernel


def _step(request: ProbeRequest, model: torch.nn.Module, kernel: AttentionKernel, batch: Batch) -> StepFn:
    forward = kernel.forward
    if request.precision == "amp" and request.group is None:  # one GPU's amp: autocast (FSDP2 casts by itself)
        forward = autocast_forward(kernel.forward, batch.input_ids.device, torch_dtype(request.dtype))
    if request.mode == "inference":
        return inference_step(model, forward, [batch])
    labels = next_token_labels(batch)
    model.train()  # as the measurement does: no dropout here, but autograd's training paths
    loss = resolve_loss(request.training.loss if request.training is not None else "full", batch.input_ids.device)
    return training_step(model, forward, [batch], [labels], make_optimizer(model), loss)  # fused allows larger sizes


def resolve_kernel_name(ctx: ChildContext, attention: AttentionName, strategy: StrategyName,
                        device: Literal["cuda", "cpu"], dtype: Dtype) -> str:
    """The kernel a strategy's `attention` resolves to on the device, for callers that must stay off CUDA."""
    import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)

    layout = STRATEGIES.get(strategy).layout
    return resolve_kernel(attention, layout, torch.device(device), torch_dtype(dtype)).name
