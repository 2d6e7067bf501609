"""The device's datasheet peak, the denominator of model FLOPs utilisation (MFU).

A datasheet figure says what the vendor promises; jobs that can also measure a matmul in the same run
report that beside it, since clocks, power limits and drivers decide what a device really delivers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PeakEntry:
    name_contains: str  # matched against torch.cuda.get_device_name, most specific entries first
    dense_half_flops: float  # bf16/fp16 tensor-core peak without sparsity, fp32 accumulation
    source: str


# Dense (no 2:4 sparsity) bf16/fp16 peaks from the vendors' datasheets; where a sheet quotes only the sparse
# figure, half of it. No fp32 entries: fp32 runs on different units and has no comparable peak here.
PEAK_TABLE: tuple[PeakEntry, ...] = (
    PeakEntry("H100 NVL", 835e12, "NVIDIA H100 datasheet: H100 NVL bf16 1,671 TFLOPS sparse → 835 dense"),
    PeakEntry("H100 PCIe", 756e12, "NVIDIA H100 datasheet: H100 PCIe bf16 1,513 TFLOPS sparse → 756 dense"),
    PeakEntry("H100", 989e12, "NVIDIA H100 datasheet: H100 SXM bf16 1,979 TFLOPS sparse → 989 dense"),
    PeakEntry("H200 NVL", 835e12, "NVIDIA H200 datasheet: H200 NVL bf16 1,671 TFLOPS sparse → 835 dense"),
    PeakEntry("H200", 989e12, "NVIDIA H200 datasheet: H200 SXM bf16 1,979 TFLOPS sparse → 989 dense"),
    PeakEntry("A100", 312e12, "NVIDIA A100 datasheet: bf16/fp16 tensor core 312 TFLOPS dense"),
    PeakEntry("L40S", 362e12, "NVIDIA L40S datasheet: bf16 362.05 TFLOPS dense (733 sparse)"),
    PeakEntry("L4", 121e12, "NVIDIA L4 datasheet: bf16 242 TFLOPS sparse → 121 dense"),
    PeakEntry("A10", 125e12, "NVIDIA A10 datasheet: bf16 tensor core 125 TFLOPS dense"),
    PeakEntry("RTX 4090", 165.2e12, "NVIDIA Ada whitepaper: RTX 4090 fp16/bf16 with fp32 accumulate 165.2 TFLOPS"),
    PeakEntry("RTX 3090", 71e12, "NVIDIA Ampere GA102 whitepaper: RTX 3090 fp16/bf16 with fp32 accumulate 71 TFLOPS"),
)


def peak_flops_for_name(device_name: str, dtype: torch.dtype) -> tuple[float | None, str]:
    if dtype not in (torch.bfloat16, torch.float16):
        return None, f"no {str(dtype).removeprefix('torch.')} peak is tabulated (bf16/fp16 only)"
    for entry in PEAK_TABLE:
        if entry.name_contains in device_name:
            return entry.dense_half_flops, entry.source
    return None, f"{device_name!r} is not in the peak table"


def peak_flops(device: torch.device, dtype: torch.dtype) -> tuple[float | None, str]:
    """The device's dense peak in FLOP/s and where the figure comes from; None when unknown."""
    if device.type != "cuda":
        return None, f"no peak is tabulated for {device.type} devices"
    return peak_flops_for_name(torch.cuda.get_device_name(device), dtype)
