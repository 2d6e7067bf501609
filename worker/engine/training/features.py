"""What a training job does to its freshly built model before any step: adapters, float8 layers, activation
checkpointing — applied in that order, before FSDP2 shards the model, and read back off the model as they ran.

The order matters: adapters go into the decoder's linear layers before those layers are wrapped for
checkpointing (so the recomputed forward includes them), and float8 replaces only plain linear layers.
Whether each can run is decided before the model is built (`training_refusal`), from the spec, the device
and the number of ranks alone, so a job that cannot run them fails at once, saying which field and why.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from padbench.contract.training import (
    Checkpointing,
    Method,
    RunPrecision,
    TrainingRun,
    TrainingSpec,
    concrete_checkpointing,
)
from padbench.worker.engine.model.adapters import add_adapters, missing_library_reason
from padbench.worker.engine.model.float8 import convert_linears_to_float8, float8_unavailable_reason
from padbench.worker.engine.model.parameter_count import parameter_count
from padbench.worker.engine.training.checkpointing import checkpoint_layers, checkpointed_layers
from padbench.worker.runtime.isolation import SpecProblem

FLOAT8_LAYER_CLASS = "Float8Linear"  # torchao's float8 linear layer, told by name: torchao may be absent


class TrainingUnsupported(SpecProblem):
    """A training feature the spec asks for cannot run here; the message names the field and why."""


@dataclass(frozen=True)
class AppliedTraining:
    """How the model trains, read off the model itself."""

    method: Method
    activation_checkpointing: Checkpointing
    precision: RunPrecision
    trainable_parameters: int
    total_parameters: int  # adapters included; a 4-bit weight counts the weights it stands for
    checkpointed_layers: int
    float8_layers: int

    @classmethod
    def of(cls, model: nn.Module, training: TrainingSpec, precision: RunPrecision) -> AppliedTraining:
        checkpointing = concrete_checkpointing(training.activation_checkpointing)
        return cls(method=training.method, activation_checkpointing=checkpointing,
                   precision=precision, trainable_parameters=parameter_count(model, trainable_only=True),
                   total_parameters=parameter_count(model), checkpointed_layers=checkpointed_layers(model),
                   float8_layers=sum(type(module).__name__ == FLOAT8_LAYER_CLASS for module in model.modules()))

    def run(self, loss: str) -> TrainingRun:
        """The result's statement of how the job trained, with the loss as it ran."""
        return TrainingRun(precision=self.precision, loss=loss, activation_checkpointing=self.activation_checkpointing,
                           method=self.method, trainable_parameters=self.trainable_parameters,
                           total_parameters=self.total_parameters)


def training_refusal(training: TrainingSpec, device: torch.device, ranks: int) -> str | None:
    """Why the training the spec asks for cannot run on `device` over `ranks` ranks (None: it can)."""
    if training.precision == "fp8":
        if training.method != "full":
            return (f"training.precision fp8 converts the base model's linear layers, and training.method "
                    f"{training.method} trains adapters on frozen ones: use precision bf16 or amp with adapters")
        reason = float8_unavailable_reason(device)
        if reason is not None:
            return reason
    return missing_library_reason(training.method, device, ranks)


def check_training(training: TrainingSpec, device: torch.device, ranks: int) -> None:
    reason = training_refusal(training, device, ranks)
    if reason is not None:
        raise TrainingUnsupported(reason)


def apply_training(model: nn.Module, training: TrainingSpec, precision: RunPrecision, device: torch.device,
                   compute_dtype: torch.dtype) -> None:
    """Adapters, float8 layers and checkpointing, in place, on a model not yet sharded."""
    check_training(training, device, ranks=1)  # one rank's view: the ranks were checked before the build
    add_adapters(model, training.method, training.lora, compute_dtype)
    if precision == "fp8" and convert_linears_to_float8(model) == 0:
        raise TrainingUnsupported(f"training.precision fp8: {type(model).__name__} has no linear layer whose "
                                  "dimensions float8 matmuls take (nn.Linear, multiples of 16)")
    try:
        checkpoint_layers(model, concrete_checkpointing(training.activation_checkpointing))
    except ValueError as error:
        raise TrainingUnsupported(str(error)) from None
