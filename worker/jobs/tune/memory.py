"""Which configurations cannot fit, decided before anything runs: the model state each rank holds (the memory
plan, exact from the model's parameter counts) plus an estimate of the activations a step keeps.

The activation estimate is deliberately simple and labelled as one: per token and decoder layer, the bytes a
16-bit transformer layer keeps for its backward (Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models", 2022: about 34·hidden without recompute once flash attention has removed the s² term; the
layer's input alone, 2·hidden, under full recompute, plus one layer recomputed at a time). Selective and
op-level recompute fall between. What the plan lets through is confirmed by running it in an isolated child: a
configuration the estimate wrongly admits runs out of memory there, and is stopped with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from padbench.contract.units import format_bytes
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec
from padbench.worker.engine.model.build import model_config
from padbench.worker.engine.model.memory_plan import ModelFootprint, job_plan, model_footprint
from padbench.worker.jobs.tune.trial_specs import padding_spec
from padbench.worker.runtime.memory import device_free_bytes

# Bytes kept per token, decoder layer and unit of hidden width, by activation checkpointing (16-bit).
ACTIVATION_BYTES = {"none": 34, "selective": 24, "ops": 16, "full": 2}
# Inference keeps one layer's activations at a time: the widest intermediate (MLP) and attention's q, k, v, o.
INFERENCE_BYTES = 16
# Headroom for the allocator's fragmentation and the CUDA context: configurations must fit in the rest.
HEADROOM = 0.1


@dataclass(frozen=True)
class Fit:
    needed: int  # bytes per GPU: model state plus estimated activations
    available: int | None  # None: unknown, nothing is pruned
    state: int  # the model state's bytes (the plan's exact part)

    @property
    def fits(self) -> bool:
        return self.available is None or self.needed <= self.available * (1 - HEADROOM)

    def reason(self) -> str:
        assert self.available is not None
        return (f"the memory plan needs {format_bytes(self.needed)} per GPU ({format_bytes(self.state)} of model "
                f"state + {format_bytes(self.needed - self.state)} of activations, estimated), more than "
                f"{1 - HEADROOM:.0%} of the {format_bytes(self.available)} available")


def available_bytes(spec: TuneJobSpec) -> int | None:
    """What every configuration must fit in per GPU: the spec's figure, else the GPU's free memory."""
    if spec.tune.memory_bytes is not None:
        return spec.tune.memory_bytes
    if spec.device == "cpu" or not torch.cuda.is_available():
        return None
    reading = device_free_bytes(torch.device("cuda", 0))
    return None if reading is None else reading[0]


def planner(spec: TuneJobSpec, ranks: int) -> ConfigPlanner:
    return ConfigPlanner(spec, model_footprint(spec.model), ranks)


class ConfigPlanner:
    def __init__(self, spec: TuneJobSpec, footprint: ModelFootprint, ranks: int) -> None:
        self.spec, self.footprint, self.ranks = spec, footprint, ranks
        config = model_config(spec.model)
        self.hidden = int(getattr(config, "hidden_size", 0) or getattr(config, "n_embd", 0) or 0)
        self.layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0) or 0)

    def fit(self, config: TuneConfig, available: int | None) -> Fit:
        plan = job_plan(padding_spec(self.spec, [config], batches=1), self.footprint, self.ranks, available)
        return Fit(plan.total + self.activations(config), available, plan.total)

    def activations(self, config: TuneConfig) -> int:
        tokens = config.batch_size * self.spec.data.max_length  # a packed row, or a padded batch at its widest
        if self.spec.mode != "training":
            return tokens * self.hidden * INFERENCE_BYTES
        kept = ACTIVATION_BYTES[config.checkpointing or "none"] * self.layers
        recomputed = ACTIVATION_BYTES["none"] if config.checkpointing not in (None, "none") else 0
        return tokens * self.hidden * (kept + recomputed)
