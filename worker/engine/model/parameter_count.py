"""Parameters counted as the model defines them, whatever they are stored as.

bitsandbytes stores a 4-bit weight packed two to a byte (a QLoRA base): its tensor has half the elements of
the weight it stands for, whose shape its quantization state keeps.
"""

from __future__ import annotations

import math

import torch

from padbench.worker.engine.model.experts import inactive_parameters


def logical_numel(parameter: torch.Tensor) -> int:
    """Elements of the weight the parameter stands for (a packed 4-bit weight's unpacked shape)."""
    quant_state = getattr(parameter, "quant_state", None)
    shape = getattr(quant_state, "shape", None)
    return math.prod(shape) if shape is not None else parameter.numel()


def parameter_count(model: torch.nn.Module, trainable_only: bool = False) -> int:
    return sum(logical_numel(parameter) for parameter in model.parameters()
               if parameter.requires_grad or not trainable_only)


def active_parameter_count(model: torch.nn.Module) -> int | None:
    """Parameters one token goes through: all but the routed experts it is not sent to; None for a dense model,
    where that is every parameter."""
    inactive = inactive_parameters(model)
    return parameter_count(model) - inactive if inactive else None
