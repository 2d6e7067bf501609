"""The device's measured matmul rate, for context: what fraction of it does each attention kernel reach?

A quoted peak says what the vendor's datasheet promises; a GEMM timed in the same run says what this
device, at this clock and temperature, under this driver, actually delivers. The sweep reports both the
rate and each kernel's fraction of it. It runs in a child, together with the environment fingerprint,
so the job's own process never creates a CUDA context that would hold memory the cells need.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from padbench.contract.spec import Dtype
from padbench.worker.engine.measure import time_calls
from padbench.worker.runtime.device import TORCH_DTYPES
from padbench.worker.runtime.environment import collect_environment
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.peaks import peak_flops

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


def measure_context(ctx: ChildContext, device_name: str, dtype: Dtype, seeds: dict[str, int]) -> dict[str, Any]:
    """Child entry point: the environment fingerprint and the matmul rate in the job's dtype."""
    device = torch.device(device_name)
    ctx.progress(0.0, f"{dtype} matmul rate")
    peak, source = peak_flops(device, TORCH_DTYPES[dtype])  # the datasheet figure, beside the measured one
    environment = collect_environment(device, dataset_digest=None, seeds=seeds, peak_flops=peak, peak_source=source)
    return {"environment": environment.model_dump(mode="json"),
            "matmul_tflops": measure_matmul_tflops(device, TORCH_DTYPES[dtype])}
