"""Fail fast when the model itself cannot fit: its weights, and in training their gradients and optimizer
state, per rank, as `memory_plan` counts them for the job's precision and number of ranks.

Without this check a model larger than the GPU spends minutes in the OOM probe and the strategies, each
failing at batch 1 with an allocator message; with it the job fails at once, saying how many bytes each rank
needs, of what, and how many the device has free.
"""

from __future__ import annotations

import torch

from padbench.contract.parallel import Parallelism
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.memory_plan import MemoryPlan, gib, job_plan, model_footprint, resolve_inference
from padbench.worker.runtime.memory import device_free_bytes


class ModelDoesNotFit(RuntimeError):
    """The model's resident state exceeds the device's free memory before any batch is run."""


def model_state_bytes(spec: PaddingJobSpec, ranks: int = 1, free_bytes: int | None = None) -> int:
    """Bytes of model state on each rank (`free_bytes` decides what `auto` inference runs as)."""
    return job_plan(spec, model_footprint(spec.model), ranks, free_bytes).total


def check_model_fits(spec: PaddingJobSpec, device: torch.device, ranks: int = 1) -> None:
    """Raise ModelDoesNotFit when a rank's model state exceeds `device`'s free memory (a GPU only)."""
    if device.type != "cuda":
        return
    memory = device_free_bytes(device)
    if memory is None:  # no NVML: the allocator will say it instead
        return
    free, total = memory
    plan = job_plan(spec, model_footprint(spec.model), ranks, free)
    if plan.total > free:
        raise ModelDoesNotFit(does_not_fit_message(spec, plan, free, total))


def does_not_fit_message(spec: PaddingJobSpec, plan: MemoryPlan, free: int, total: int) -> str:
    state = "weights, gradients and optimizer state" if plan.mode == "training" else "weights"
    held = f"in {plan.precision}" if plan.precision != "amp" else f"in amp (fp32, computing in {plan.compute_dtype})"
    per_rank = "" if plan.ranks == 1 else f" per rank ({plan.parallelism} over {plan.ranks} GPUs)"
    parts = f" ({plan.breakdown()})" if len(plan.parts()) > 1 else ""
    return (f"model {spec.model.label!r} does not fit: its {state} {held}{parts} need {gib(plan.total)}{per_rank}, "
            f"and the GPU has {gib(free)} free of {gib(total)}, before any batch")


def inference_parallelism(spec: PaddingJobSpec, device: torch.device, ranks: int) -> Parallelism:
    """What inference on `ranks` ranks runs as, decided as `padbench plan` decides it: replicated when a full
    copy of the weights fits this rank's GPU, sharded when not."""
    memory = device_free_bytes(device) if device.type == "cuda" else None
    free = None if memory is None else memory[0]
    return resolve_inference(spec.distributed.inference, model_footprint(spec.model), spec.dtype, ranks, free)


# What a whole copy may take of a GPU's free memory before the model is sharded: the rest is for the shards
# FSDP keeps while the whole copy is still there, and the allocator.
WHOLE_COPY_SHARE = 0.8


def whole_copy_fits(spec: PaddingJobSpec, device: torch.device, weights_dtype: torch.dtype) -> bool:
    """Whether this rank can build the whole model in `weights_dtype` before sharding it (always on a CPU)."""
    memory = device_free_bytes(device) if device.type == "cuda" else None
    if memory is None:
        return True
    return model_footprint(spec.model).parameters * weights_dtype.itemsize <= memory[0] * WHOLE_COPY_SHARE
