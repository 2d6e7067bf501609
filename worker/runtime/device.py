"""Which device and dtype a job runs on, resolved from the spec's names."""

from __future__ import annotations

import torch

from padbench.contract.spec import Device, Dtype

TORCH_DTYPES: dict[Dtype, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class DeviceUnavailable(RuntimeError):
    pass


def torch_dtype(name: Dtype) -> torch.dtype:
    return TORCH_DTYPES[name]


def resolve_device(name: Device) -> torch.device:
    """`auto` is the first CUDA GPU when there is one, else the CPU; `cuda` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise DeviceUnavailable(f"device: 'cuda' was asked for, but torch {torch.__version__} sees no CUDA GPU")
    return torch.device(name)
