"""Attention kernels: the typed plugin family a spec's `attention` is resolved through.

A spec names a family (`flash`, `torch-flash`, `flash-attn`, `flash-attn-cute`, `sdpa`, `flex`, `eager`);
`resolve_kernel` picks the registered kernel of that family for the batch layout and checks that it really
runs on the device and dtype. `flash` means the best flash implementation present; an explicit name that
cannot run is an error naming the kernel — never a silent substitute.
"""

from __future__ import annotations

import torch

from padbench.contract.spec import AttentionName
from padbench.worker.engine.attention import packed, padded  # noqa: F401  (importing registers the kernels)
from padbench.worker.engine.attention.base import ATTENTION_KERNELS, AttentionKernel
from padbench.worker.engine.attention.ops import KernelUnavailable
from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch

__all__ = ["ATTENTION_KERNELS", "AttentionKernel", "KernelUnavailable", "available_kernels", "resolve_kernel"]

# Fastest first: flash-attn-4's forward ran 1.7–1.8× as fast as torch's FA2 on an H200 at 2K–16K tokens
# (B8 H32 D64, the attention sweep in docs/benchmarks.md); FA2 proper before torch's copy of it because it
# is usually the newer build.
FLASH_PREFERENCE: tuple[str, ...] = ("flash-attn-cute", "flash-attn", "torch-flash")
# Availability listings (worker capabilities) assume the dtype benchmarks run in.
CAPABILITY_DTYPE = torch.bfloat16


def kernel_for(family: str, layout: type[PaddedBatch] | type[PackedBatch]) -> AttentionKernel:
    """The registered kernel implementing `family` for `layout`."""
    for _, kernel in ATTENTION_KERNELS.items():
        if kernel.family == family and kernel.layout is layout:
            return kernel
    raise KernelUnavailable(family, f"no kernel of this family handles {layout.__name__}")


def resolve_kernel(name: AttentionName, layout: type[PaddedBatch] | type[PackedBatch], device: torch.device,
                   dtype: torch.dtype) -> AttentionKernel:
    if name != "flash":
        kernel = kernel_for(name, layout)
        reason = kernel.unavailable_reason(device, dtype)
        if reason is not None:
            raise KernelUnavailable(kernel.name, f"{reason} (on {device}, {_dtype_name(dtype)})")
        return kernel
    reasons = []
    for family in FLASH_PREFERENCE:
        kernel = kernel_for(family, layout)
        reason = kernel.unavailable_reason(device, dtype)
        if reason is None:
            return kernel
        reasons.append(f"{kernel.name}: {reason}")
    raise KernelUnavailable("flash", f"no flash implementation runs on {device} in {_dtype_name(dtype)} "
                                     f"({'; '.join(reasons)})")


def available_kernels(device: torch.device | str) -> list[str]:
    """Names of the kernels that run on `device` in bf16. Probes the device: call it in a child process."""
    device = torch.device(device)
    return [name for name, kernel in ATTENTION_KERNELS.items()
            if kernel.unavailable_reason(device, CAPABILITY_DTYPE) is None]


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
