"""Fail fast when the model itself cannot fit: weights, and in training their gradients and AdamW state.

Without this check a model larger than the GPU spends minutes in the OOM probe and the strategies, each
failing at batch 1 with an allocator message; with it the job fails at once, saying how many bytes the
model needs and how many the device has free.
"""

from __future__ import annotations

import torch

from padbench.contract.spec import PaddingJobSpec
from padbench.worker.engine.model import count_parameters
from padbench.worker.runtime.device import torch_dtype
from padbench.worker.runtime.memory import device_free_bytes

# Training keeps, per parameter, the weight, its gradient and AdamW's two moments, all in the model dtype.
TRAINING_COPIES = 4


class ModelDoesNotFit(RuntimeError):
    """The model's resident state exceeds the device's free memory before any batch is run."""


def model_state_bytes(spec: PaddingJobSpec) -> int:
    copies = TRAINING_COPIES if spec.mode == "training" else 1
    return count_parameters(spec.model) * torch_dtype(spec.dtype).itemsize * copies


def check_model_fits(spec: PaddingJobSpec, device: torch.device) -> None:
    if device.type != "cuda":
        return
    memory = device_free_bytes(device)
    if memory is None:  # no NVML: the allocator will say it instead
        return
    free, total = memory
    needed = model_state_bytes(spec)
    if needed > free:
        state = "weights, gradients and AdamW state" if spec.mode == "training" else "weights"
        raise ModelDoesNotFit(f"model {spec.model.label!r} does not fit: its {state} in {spec.dtype} need "
                              f"{needed / 2**30:.1f} GiB, and the GPU has {free / 2**30:.1f} GiB free of "
                              f"{total / 2**30:.1f} GiB, before any batch")


# Room left beside one replica's weights for activations and the allocator (a fraction of the GPU).
REPLICA_HEADROOM = 0.3


def weights_fit_one_device(spec: PaddingJobSpec, device: torch.device) -> bool:
    """Whether one full copy of the weights, with room to compute, fits this GPU: inference then replicates
    the model on every GPU instead of sharding it. Always on a CPU (nothing to run out of but the host)."""
    if device.type != "cuda":
        return True
    memory = device_free_bytes(device)
    if memory is None:
        return True
    free, _ = memory
    return count_parameters(spec.model) * torch_dtype(spec.dtype).itemsize <= free * (1 - REPLICA_HEADROOM)
