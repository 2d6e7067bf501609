"""The device's measured matmul rate: the denominator of MFU as this device delivers it today.

A quoted peak says what the vendor's datasheet promises; a GEMM timed in the same run says what this
device, at this clock and temperature, under this driver, actually delivers. Padding jobs report MFU
against both; the attention sweep reports each kernel's fraction of the measured rate.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from padbench.worker.engine.measure.timing import time_calls

# Large enough to saturate the tensor cores of an H100/H200 (2·8192³ ≈ 1.1 TFLOP per call); the CPU
# size keeps the measurement to about a second on a laptop.
GEMM_SIZE = {"cuda": 8192, "cpu": 1024}
GEMM_WARMUP = 3
GEMM_REPEATS = 20


def measure_matmul_tflops(device: torch.device, dtype: torch.dtype, size: int | None = None) -> float:
    """Median TFLOP/s of an n×n×n GEMM, alternating between two operand pairs."""
    n = size or GEMM_SIZE[device.type]
    pairs = [(torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype))
             for _ in range(2)]
    output = torch.empty(n, n, device=device, dtype=dtype)
    for index in range(GEMM_WARMUP):
        torch.matmul(*pairs[index % 2], out=output)
    seconds = _time_gemms(pairs, output, device)
    return 2.0 * n**3 / float(np.median(seconds)) / 1e12


def _time_gemms(pairs: list[tuple[torch.Tensor, torch.Tensor]], output: torch.Tensor,
                device: torch.device) -> list[float]:
    calls = [functools.partial(torch.matmul, *pairs[index % 2], out=output) for index in range(GEMM_REPEATS)]
    return time_calls(calls, device)
