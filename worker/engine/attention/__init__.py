"""Attention kernels of padded rows and packs, found through the kernel families a spec's `attention` names.

A spec names a family (`sdpa`, `flex`, `eager`, `torch-flash`, `flash-attn`, `flash-attn-cute`) or `flash`;
each family's declaration (`padbench/kernels/<family>.py`) names its padded and packed kernels' classes, which
`ATTENTION_KERNELS` loads and binds to their declared names and facts. `resolve_kernel` picks the family's kernel
for the batch layout and checks that it really runs on the device and dtype. `flash` means the fastest flash
implementation present; an explicit name that cannot run is an error naming the kernel — never a silent substitute.
"""

from __future__ import annotations

import torch

from padbench.contract.kernel_families import BEST_FLASH, KERNEL_FAMILIES, AttentionName, families, flash_families
from padbench.contract.kernel_family import KernelFamily, ModelEntryPoint
from padbench.worker.engine.attention.base import AttentionKernel
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch
from padbench.worker.engine.families import FamilyKernels, bound_class

__all__ = ["ATTENTION_KERNELS", "AttentionKernel", "KernelUnavailable", "available_kernels", "resolve_kernel"]

Layout = type[PaddedBatch] | type[PackedBatch]
LAYOUTS: dict[ModelEntryPoint, Layout] = {"padded": PaddedBatch, "packed": PackedBatch}
# Availability listings (worker capabilities) assume the dtype benchmarks run in.
CAPABILITY_DTYPE = torch.bfloat16


def _family_kernels(family: KernelFamily) -> list[tuple[str, AttentionKernel]]:
    """A family's padded and packed kernels, each its implementation bound to its declaration."""
    kernels = []
    for entry, layout in LAYOUTS.items():
        declared = family.kernel(entry)
        if declared is not None:
            kernel: AttentionKernel = bound_class(declared, family.name, AttentionKernel)()
            if kernel.layout is not layout:
                raise TypeError(f"{declared.implementation} computes {kernel.layout.__name__}, not the {entry} rows "
                                f"its declaration ({family.name}) puts it at")
            kernels.append((declared.name, kernel))
    return kernels


ATTENTION_KERNELS: FamilyKernels[AttentionKernel] = FamilyKernels("attention kernel", _family_kernels)


def entry_point(layout: Layout) -> ModelEntryPoint:
    return "padded" if layout is PaddedBatch else "packed"


def kernel_for(family: str, layout: Layout) -> AttentionKernel:
    """The kernel implementing `family` for `layout`."""
    declared = KERNEL_FAMILIES.get(family).kernel(entry_point(layout))
    if declared is None:
        raise KernelUnavailable(family, f"no kernel of this family handles {layout.__name__}")
    return ATTENTION_KERNELS.get(declared.name)


def resolve_kernel(name: AttentionName, layout: Layout, device: torch.device, dtype: torch.dtype) -> AttentionKernel:
    if name != BEST_FLASH:
        kernel = kernel_for(name, layout)
        reason = kernel.unavailable_reason(device, dtype)
        if reason is not None:
            raise KernelUnavailable(kernel.name, f"{reason} (on {device}, {_dtype_name(dtype)})")
        return kernel
    reasons = []
    for family in flash_families(entry_point(layout)):
        kernel = kernel_for(family.name, layout)
        reason = kernel.unavailable_reason(device, dtype)
        if reason is None:
            return kernel
        reasons.append(f"{kernel.name}: {reason}")
    raise KernelUnavailable(BEST_FLASH, f"no flash implementation runs on {device} in {_dtype_name(dtype)} "
                                        f"({'; '.join(reasons)})")


def available_kernels(device: torch.device | str) -> list[str]:
    """Names of the kernels that run on `device` in bf16. Probes the device: call it in a child process."""
    device = torch.device(device)
    return [name for name, kernel in ATTENTION_KERNELS.items()
            if kernel.unavailable_reason(device, CAPABILITY_DTYPE) is None]


def runnable_families(device: torch.device | str) -> list[str]:
    """The families whose every padded and packed kernel runs on `device` in bf16: a padding job naming one
    runs here whatever its strategies. Probes the device: call it in a child process."""
    available = set(available_kernels(device))
    return [family.name for family in families() if (kernels := _kernel_names(family)) and kernels <= available]


def _kernel_names(family: KernelFamily) -> set[str]:
    return {kernel.name for entry in LAYOUTS if (kernel := family.kernel(entry)) is not None}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
