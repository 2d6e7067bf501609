"""Model state per rank, on paper: the bytes each GPU of a padding job holds before its first batch.

Pure arithmetic from the model's parameter counts (read off the model built on the meta device: no memory,
no weights, any size) and the job's spec and number of ranks. `padbench plan` prints it and the job checks
it before it loads anything. Activations are not in it: they depend on the batch, which the OOM probe sizes
in whatever memory is left.

Training keeps, per parameter:
- precision of the job's dtype (`bf16`, or `auto` on one GPU): the weight, its gradient and AdamW's two
  moments, all in the dtype (four copies);
- precision `amp`: an fp32 master weight, an fp32 gradient and two fp32 moments (16 bytes). On one GPU
  autocast casts each weight to the compute dtype as an op uses it, so nothing else stays resident.
- on several GPUs (FSDP2, `fully_shard` on every decoder layer and the root) the same state, sharded: 1/N
  of it per rank. Each rank also holds the unsharded compute copies FSDP2 all-gathers: the root's own
  parameters (embeddings, final norm, LM head), which FSDP2 keeps unsharded from the forward into the
  backward, and `GATHERED_DECODER_LAYERS` decoder layers at once.
With LoRA adapters (`training.method` lora or qlora) only the adapters train: the frozen base weights are
kept as built (in the dtype, or fp32 under `amp`) with no gradient and no optimizer state; the adapters have
both. QLoRA keeps the base's linear layers in 4 bits (NF4, with one 8-bit scale per block of 64 weights after
double quantization) and its adapters in fp32, as bitsandbytes and PEFT leave them.
Activation checkpointing and fp8 change activations and compute, not this state: fp8 keeps the weights in bf16.
Inference keeps the weights in the job's dtype: all of them on every GPU (`single`, `replicated`), or 1/N
per rank plus the same gathered copies (`sharded`).
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Literal

import torch

from padbench.contract.model_spec import ModelSpec
from padbench.contract.parallel import InferenceParallelism, Parallelism
from padbench.contract.spec import Dtype
from padbench.contract.training import RunPrecision, TrainingSpec, precision_run
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.adapters import AdaptersUnsupported, add_adapters, quantizable_linears
from padbench.worker.engine.model.build import build_on_meta
from padbench.worker.engine.model.experts import inactive_parameters

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}
# A 4-bit NF4 weight: half a byte, and its block's 8-bit scale shared by 64 weights (the second level of double
# quantization, one fp32 per 256 blocks, is under a thousandth of a byte and left out).
NF4_BYTES_PER_WEIGHT = 0.5 + 1 / 64
MASTER_BYTES = 4  # amp keeps weights, gradients and optimizer moments in fp32
ADAMW_MOMENTS = 2  # AdamW's first and second moments, one of each per parameter
# Decoder layers FSDP2 holds unsharded at once: the one computing and the next, prefetched while it computes
# (FSDP2 prefetches one layer ahead, in the forward and in the backward).
GATHERED_DECODER_LAYERS = 2
# What `auto` inference leaves free beside a full replica of the weights: the CUDA context, cuBLAS workspaces
# and a batch's activations. A tenth of the GPU's free memory, and at least 2 GiB.
REPLICA_HEADROOM_SHARE = 0.10
REPLICA_HEADROOM_MIN_BYTES = 2 * 2**30


@dataclass(frozen=True)
class ModelFootprint:
    """The parameter counts the plan needs (tied parameters counted once)."""

    parameters: int
    decoder_layers: int
    largest_layer_parameters: int  # one decoder layer: FSDP2's unit of sharding and gathering
    root_parameters: int  # outside the decoder layers: embeddings, final norm, LM head
    # Mixtures of experts: the parameters one token goes through (its top-k routed experts and everything
    # else); None for a dense model. Memory holds every expert; only compute is per active parameter.
    active_parameters: int | None = None

    @property
    def gathered_parameters(self) -> int:
        """Parameters a rank of a sharded run holds unsharded at once."""
        return self.root_parameters + min(GATHERED_DECODER_LAYERS, self.decoder_layers) * self.largest_layer_parameters

    @property
    def all_gathered_parameters(self) -> int:
        """Parameters a rank holds unsharded at the end of a forward that keeps every layer gathered for its
        backward (`distributed.reshard_after_forward: false`): all of them, counted by their largest layer."""
        return self.root_parameters + max(self.decoder_layers, 1) * self.largest_layer_parameters


def model_footprint(spec: ModelSpec) -> ModelFootprint:
    """The spec's model counted on the meta device. Its decoder layers are the modules transformers names as
    never to be split (`_no_split_modules`, what FSDP wrap policies read); a model naming none counts as one
    unit, all of it gathered when sharded."""
    model = build_on_meta(spec)
    unsplit = set(getattr(model, "_no_split_modules", None) or ())
    layers = [module for module in model.modules() if type(module).__name__ in unsplit]
    total = _count(model)
    sizes = [_count(layer) for layer in layers]
    inactive = inactive_parameters(model)
    return ModelFootprint(parameters=total, decoder_layers=len(layers),
                          largest_layer_parameters=max(sizes, default=0), root_parameters=total - sum(sizes),
                          active_parameters=total - inactive if inactive else None)


@dataclass(frozen=True)
class AdapterFootprint:
    """What LoRA adds to and changes in the model's state."""

    adapters: int  # adapter parameters: the only ones that train
    quantized: int  # base weights kept in 4 bits (QLoRA); 0 for LoRA
    adapter_bytes: int  # bytes of an adapter parameter, its gradient and each optimizer moment, where not `amp`


def adapter_footprint(spec: ModelSpec, training: TrainingSpec, dtype: Dtype) -> AdapterFootprint | None:
    """The adapters the job's training adds, counted on the meta device as PEFT adds them (None: full training)."""
    if training.method == "full":
        return None
    if importlib.util.find_spec("peft") is None:  # the plan counts adapters as PEFT adds them
        raise AdaptersUnsupported(f"training.method {training.method}: cannot count its adapters without PEFT, "
                                  "which is not installed here (pip install 'padbench[training]')")
    model = build_on_meta(spec)
    quantized = sum(layer.weight.numel() for _, _, layer in quantizable_linears(model)) \
        if training.method == "qlora" else 0
    add_adapters(model, "lora", training.lora, torch.float32)  # the 4-bit layers hold the same shapes
    adapters = sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)
    adapter_bytes = MASTER_BYTES if training.method == "qlora" else DTYPE_BYTES[dtype]
    return AdapterFootprint(adapters=adapters, quantized=quantized, adapter_bytes=adapter_bytes)


def _count(module: torch.nn.Module) -> int:
    return sum(parameter.numel() for parameter in module.parameters())


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes of model state on each rank, by part."""

    mode: Literal["inference", "training"]
    ranks: int
    parallelism: Parallelism
    precision: RunPrecision  # what the weights are kept in (inference: the job's dtype)
    compute_dtype: Dtype
    parameters: int
    weights: int
    gradients: int
    optimizer: int
    gathered_layers: int
    trainable_parameters: int | None = None  # None: every parameter trains (the job trains no adapters)

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.optimizer + self.gathered_layers

    def parts(self) -> list[tuple[str, int]]:
        """The named parts a rank holds (those it holds none of left out)."""
        named = [("weights", self.weights), ("gradients", self.gradients), ("optimizer state", self.optimizer),
                 ("gathered layers", self.gathered_layers)]
        return [(name, count) for name, count in named if count]

    def breakdown(self) -> str:
        """`weights 7.5 GiB + gradients 7.5 GiB + …`: the parts, as a message names them."""
        return " + ".join(f"{name} {gib(count)}" for name, count in self.parts())

    def __str__(self) -> str:
        where = "one GPU" if self.ranks == 1 else f"{self.ranks} GPUs, {self.parallelism}"
        return (f"{self.mode} on {where}, {self.precision}: {gib(self.total)} per rank "
                f"({self.breakdown()})")


def gib(count: int) -> str:
    return f"{count / 2**30:.1f} GiB"


def _shard(parameters: int, ranks: int) -> int:
    """A rank's share of the parameters (FSDP2 pads each parameter's first dimension to a multiple of the
    ranks: a few rows, not counted)."""
    return math.ceil(parameters / ranks)


def training_plan(footprint: ModelFootprint, dtype: Dtype, precision: RunPrecision, ranks: int,
                  adapters: AdapterFootprint | None = None, reshard_after_forward: bool = True) -> MemoryPlan:
    # fp8 keeps the weights (and AdamW's state) in the job's dtype; only the matmuls' inputs are cast, briefly.
    compute: Dtype = dtype if precision in ("amp", "fp8") else precision  # type: ignore[assignment]
    kept = MASTER_BYTES if precision == "amp" else DTYPE_BYTES[compute]
    unsharded = footprint.gathered_parameters if reshard_after_forward else footprint.all_gathered_parameters
    gathered = 0 if ranks == 1 else unsharded * DTYPE_BYTES[compute]
    if adapters is None:
        held = _shard(footprint.parameters, ranks)
        weights, trained, trained_bytes = held * kept, held, kept
    else:  # a frozen base (partly in 4 bits) beside adapters, which alone have gradients and AdamW state
        trained_bytes = MASTER_BYTES if precision == "amp" else adapters.adapter_bytes
        base = (footprint.parameters - adapters.quantized) * kept
        weights = _shard(math.ceil(base + adapters.quantized * NF4_BYTES_PER_WEIGHT), ranks) \
            + _shard(adapters.adapters, ranks) * trained_bytes
        trained = _shard(adapters.adapters, ranks)
    return MemoryPlan(mode="training", ranks=ranks, parallelism="single" if ranks == 1 else "sharded",
                      precision=precision, compute_dtype=compute, parameters=footprint.parameters,
                      weights=weights, gradients=trained * trained_bytes,
                      optimizer=trained * trained_bytes * ADAMW_MOMENTS, gathered_layers=gathered,
                      trainable_parameters=None if adapters is None else adapters.adapters)


def inference_plan(footprint: ModelFootprint, dtype: Dtype, ranks: int, parallelism: Parallelism) -> MemoryPlan:
    element = DTYPE_BYTES[dtype]
    if ranks == 1 or parallelism != "sharded":
        weights, gathered = footprint.parameters * element, 0
    else:
        weights = _shard(footprint.parameters, ranks) * element
        gathered = footprint.gathered_parameters * element
    return MemoryPlan(mode="inference", ranks=ranks, parallelism="single" if ranks == 1 else parallelism,
                      precision=dtype, compute_dtype=dtype, parameters=footprint.parameters, weights=weights,
                      gradients=0, optimizer=0, gathered_layers=gathered)


def replica_headroom(free_bytes: int) -> int:
    return max(REPLICA_HEADROOM_MIN_BYTES, int(REPLICA_HEADROOM_SHARE * free_bytes))


def replica_fits(footprint: ModelFootprint, dtype: Dtype, free_bytes: int) -> bool:
    """Whether one GPU with `free_bytes` free holds a full copy of the weights and the headroom beside it."""
    return footprint.parameters * DTYPE_BYTES[dtype] + replica_headroom(free_bytes) <= free_bytes


def replica_needs(footprint: ModelFootprint, dtype: Dtype) -> int:
    """The free memory per GPU from which `auto` inference runs replicated (to a byte or so)."""
    weights = footprint.parameters * DTYPE_BYTES[dtype]
    return max(weights + REPLICA_HEADROOM_MIN_BYTES, math.ceil(weights / (1 - REPLICA_HEADROOM_SHARE)))


def resolve_inference(choice: InferenceParallelism, footprint: ModelFootprint, dtype: Dtype, ranks: int,
                      free_bytes: int | None) -> Parallelism:
    """What inference runs as: `single` on one rank; `auto` is replicated when a full copy of the weights and
    the headroom fit each GPU's free memory, sharded when not, and replicated when the memory is not known
    (as on a CPU, where the ranks share the host's memory)."""
    if ranks == 1:
        return "single"
    if choice != "auto":
        return choice
    return "replicated" if free_bytes is None or replica_fits(footprint, dtype, free_bytes) else "sharded"


def job_plan(spec: PaddingJobSpec, footprint: ModelFootprint, ranks: int, free_bytes: int | None) -> MemoryPlan:
    """The plan of a padding job on `ranks` ranks whose GPUs each have `free_bytes` free (None: unknown)."""
    if spec.mode == "training":
        precision = precision_run(spec.training.precision, spec.dtype, ranks)
        return training_plan(footprint, spec.dtype, precision, ranks,
                             adapter_footprint(spec.model, spec.training, spec.dtype),
                             reshard_after_forward=spec.distributed.reshard_after_forward)
    parallelism = resolve_inference(spec.distributed.inference, footprint, spec.dtype, ranks, free_bytes)
    return inference_plan(footprint, spec.dtype, ranks, parallelism)
