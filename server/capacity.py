"""Whether any worker in contact could hold a job's model at all, judged at submit from the spec alone.

A model whose stated width and depth give it, at the very least, more weights than the largest worker in contact
can hold is refused with the reason, rather than claimed and left to grow until a memory cap kills it. The
judgement errs towards admitting: the parameters are a lower bound (two attention matrices and a two-matrix MLP
a layer, the embeddings once), the bytes are the dtype's for inference and four copies of it for training
(weights, gradients and AdamW's two moments, in the dtype at the least), and a worker's capacity is all its GPUs'
memory together (the job could shard over every one) or, without GPUs, the memory its jobs may hold. Without a
worker in contact, or without the width and depth in the spec, nothing is refused: the job waits, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from padbench.contract.api import Capabilities
from padbench.contract.model_spec import ModelSpec, width_and_depth
from padbench.contract.spec import JobSpecBase
from padbench.contract.units import format_bytes

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
# Training keeps at least the weights, their gradients and AdamW's two moments.
TRAINING_COPIES = 4


def parameters_lower_bound(fields: dict[str, Any] | None) -> int | None:
    """At least this many parameters, from stated width, depth, MLP width and vocabulary; None when unstated."""
    shape = width_and_depth(fields)
    if fields is None or shape is None:
        return None
    width, layers = shape
    inner = _stated(fields, "intermediate_size", "n_inner") or 0
    vocab = _stated(fields, "vocab_size") or 0
    return layers * (2 * width * width + 2 * width * inner) + width * vocab


def _stated(fields: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def worker_capacity(worker: Capabilities) -> int | None:
    """The most memory one job could use on the worker: all its GPUs, or the host memory its jobs may hold."""
    if worker.gpus:
        return sum(gpu.memory_bytes for gpu in worker.gpus)
    if worker.device == "cuda" and worker.gpu_memory_bytes is not None:
        return worker.gpu_memory_bytes
    return worker.job_memory_bytes


def capacity_problem(spec: JobSpecBase, live_workers: Sequence[Capabilities]) -> str | None:
    """Why no worker in contact could hold the spec's model, or None when one might (or nothing is known)."""
    model = getattr(spec, "model", None)
    if not isinstance(model, ModelSpec):
        return None
    parameters = parameters_lower_bound(model.architecture())
    capacities = [capacity for worker in live_workers if (capacity := worker_capacity(worker)) is not None]
    if parameters is None or not capacities:
        return None
    dtype = str(getattr(spec, "dtype", "bf16"))
    training = getattr(spec, "mode", None) == "training"
    needed = parameters * DTYPE_BYTES.get(dtype, 2) * (TRAINING_COPIES if training else 1)
    if needed <= max(capacities):
        return None
    what = "weights, gradients and AdamW state" if training else "weights"
    return (f"the model has at least {parameters:.3g} parameters (by its stated width and depth), whose {what} in "
            f"{dtype} take at least {format_bytes(needed)}; the largest worker in contact can hold "
            f"{format_bytes(max(capacities))} (all its GPUs, or the memory its jobs may use)")
