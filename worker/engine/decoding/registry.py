"""The KV-cache attention kernels of generate jobs, by name, and the choice of one for a spec's `attention`."""

from __future__ import annotations

import torch

from padbench.contract.registry import Registry
from padbench.worker.engine.attention.ops import KernelUnavailable
from padbench.worker.engine.decoding.flex_decode import FlexDecode
from padbench.worker.engine.decoding.kernels import DecodeKernel, EagerDecode, SdpaDecode, TorchFlashDecode

DECODE_KERNELS: Registry[DecodeKernel] = Registry("decode attention kernel")
for _kernel in (TorchFlashDecode(), SdpaDecode(), EagerDecode(), FlexDecode()):
    DECODE_KERNELS.add(_kernel.name, _kernel)

# `flash` means the fastest flash implementation with a cache path; torch's is the one there is.
FLASH_FAMILIES = ("torch-flash",)


def resolve_decode_kernel(attention: str, device: torch.device, dtype: torch.dtype) -> DecodeKernel:
    families = FLASH_FAMILIES if attention == "flash" else (attention,)
    reasons = []
    for family in families:
        kernel = next((k for _, k in DECODE_KERNELS.items() if k.family == family), None)
        if kernel is None:
            reasons.append(f"{family} has no KV-cache kernel in padbench's generate jobs (they offer "
                           f"{', '.join(sorted({k.family for _, k in DECODE_KERNELS.items()}))})")
            continue
        reason = kernel.unavailable_reason(device, dtype)
        if reason is None:
            return kernel
        reasons.append(f"{kernel.name}: {reason}")
    raise KernelUnavailable(attention, "; ".join(reasons) + f" (on {device}, {str(dtype).removeprefix('torch.')})")
