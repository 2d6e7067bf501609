"""What one step of a padding job needs on each GPU, estimated before anything runs: the model state each rank
holds (the memory plan, exact from the model's parameter counts) plus an estimate of the activations a step keeps.

The activation estimate is deliberately simple and labelled as one: per token and decoder layer, the bytes a
16-bit transformer layer keeps for its backward (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", 2022: about 34·hidden without recompute once flash attention has removed the s² term; the
layer's input alone, 2·hidden, under full recompute, plus one layer recomputed at a time). Selective and
op-level recompute fall between. What the estimate lets through is confirmed by running it in an isolated child
(the OOM probe, or a tune's trial): a configuration it wrongly admits runs out of memory there, not in the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from padbench.contract.model_spec import ModelSpec
from padbench.contract.training import Checkpointing
from padbench.contract.units import format_bytes
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.build import model_config
from padbench.worker.engine.model.memory_plan import ModelFootprint, job_plan, model_footprint

# Bytes kept per token, decoder layer and unit of hidden width, by activation checkpointing (16-bit).
ACTIVATION_BYTES: dict[Checkpointing, int] = {"none": 34, "ops": 16, "selective": 24, "full": 2}
# Least recompute first: what `activation_checkpointing: auto` tries in turn, and the order a hint suggests.
LEAST_RECOMPUTE_FIRST: tuple[Checkpointing, ...] = ("none", "ops", "selective", "full")
# Inference keeps one layer's activations at a time: the widest intermediate (MLP) and attention's q, k, v, o.
INFERENCE_BYTES = 16
# Headroom for the allocator's fragmentation and the CUDA context: a step must fit in the rest.
HEADROOM = 0.1


@dataclass(frozen=True)
class Fit:
    needed: int  # bytes per GPU: model state plus estimated activations
    available: int | None  # None: unknown, everything fits
    state: int  # the model state's bytes (the plan's exact part)

    @property
    def fits(self) -> bool:
        return self.available is None or self.needed <= self.available * (1 - HEADROOM)

    @property
    def activations(self) -> int:
        return self.needed - self.state

    def reason(self) -> str:
        assert self.available is not None
        return (f"the memory plan needs {format_bytes(self.needed)} per GPU ({format_bytes(self.state)} of model "
                f"state + {format_bytes(self.activations)} of activations, estimated), more than "
                f"{1 - HEADROOM:.0%} of the {format_bytes(self.available)} available")


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    kv_width: int  # a token's keys (or values) in one layer: key/value heads × head width

    @classmethod
    def of(cls, model: ModelSpec) -> ModelShape:
        config = model_config(model)
        hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 0)
        heads = int(getattr(config, "num_attention_heads", 0) or getattr(config, "n_head", 0) or 1)
        kv_heads = int(getattr(config, "num_key_value_heads", 0) or heads)
        head_dim = int(getattr(config, "head_dim", 0) or hidden // heads)
        return cls(hidden=hidden, layers=int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0)
                                             or 0), kv_width=kv_heads * head_dim)

    def kv_cache_bytes(self, sequences: int, tokens_each: int, element_bytes: int) -> int:
        """A KV cache holding `sequences` sequences of `tokens_each` tokens: keys and values of every layer."""
        return sequences * tokens_each * self.layers * 2 * self.kv_width * element_bytes

    def activation_bytes(self, tokens: int, mode: Literal["inference", "training"],
                         checkpointing: Checkpointing | None) -> int:
        """Activations a step over `tokens` tokens keeps at its peak (a packed row, or a padded batch at its
        widest): all layers' kept tensors in training, plus one layer recomputed at a time under recompute."""
        if mode != "training":
            return tokens * self.hidden * INFERENCE_BYTES
        choice = checkpointing or "none"
        kept = ACTIVATION_BYTES[choice] * self.layers
        recomputed = ACTIVATION_BYTES["none"] if choice != "none" else 0
        return tokens * self.hidden * (kept + recomputed)


class StepPlanner:
    """Fits of one padding job's steps, by batch size and checkpointing, on `ranks` ranks."""

    def __init__(self, spec: PaddingJobSpec, ranks: int, footprint: ModelFootprint | None = None) -> None:
        self.spec, self.ranks = spec, ranks
        self.footprint = footprint or model_footprint(spec.model)
        self.shape = ModelShape.of(spec.model)

    def fit(self, batch_size: int, checkpointing: Checkpointing | None, available: int | None,
            width: int | None = None) -> Fit:
        """A step of `batch_size` rows of `width` tokens (default: the job's max_length)."""
        state = job_plan(self.spec, self.footprint, self.ranks, available).total
        tokens = batch_size * (width or self.spec.data.max_length)
        return Fit(state + self.shape.activation_bytes(tokens, self.spec.mode, checkpointing), available, state)
