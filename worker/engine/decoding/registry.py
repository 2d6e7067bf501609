"""The KV-cache attention kernels of generate jobs, found through the kernel families' decode kernels, and the
choice of one for a spec's `attention`."""

from __future__ import annotations

import torch

from padbench.contract.kernel_families import AttentionName, attention_candidates, families, missing_entry_point
from padbench.contract.kernel_family import KernelFamily
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.decoding.kernels import DecodeKernel
from padbench.worker.engine.families import FamilyKernels, bound_class

# Availability listings (worker capabilities) assume the dtype benchmarks run in.
CAPABILITY_DTYPE = torch.bfloat16


def _decode_kernel(family: KernelFamily) -> list[tuple[str, DecodeKernel]]:
    declared = family.decode
    if declared is None:
        return []
    kernel: DecodeKernel = bound_class(declared, family.name, DecodeKernel)()
    return [(declared.name, kernel)]


DECODE_KERNELS: FamilyKernels[DecodeKernel] = FamilyKernels("decode attention kernel", _decode_kernel)


def resolve_decode_kernel(attention: AttentionName, device: torch.device, dtype: torch.dtype) -> DecodeKernel:
    """The decode kernel `attention` runs as here: the family's, or for `flash` the fastest flash one that runs."""
    missing = missing_entry_point(attention, "decode")
    if missing is not None:
        raise KernelUnavailable(attention, missing)
    reasons = []
    for family in attention_candidates(attention, "decode"):
        assert family.decode is not None  # a candidate has the entry point
        kernel = DECODE_KERNELS.get(family.decode.name)
        reason = kernel.unavailable_reason(device, dtype)
        if reason is None:
            return kernel
        reasons.append(f"{kernel.name}: {reason}")
    raise KernelUnavailable(attention, "; ".join(reasons) + f" (on {device}, {str(dtype).removeprefix('torch.')})")


def runnable_decode_families(device: torch.device | str) -> list[str]:
    """The families whose decode kernel runs on `device` in bf16. Probes the device: call it in a child process."""
    target = torch.device(device)
    return [family.name for family in families() if family.decode is not None
            and DECODE_KERNELS.get(family.decode.name).unavailable_reason(target, CAPABILITY_DTYPE) is None]
