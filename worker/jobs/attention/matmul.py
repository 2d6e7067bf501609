"""The attention sweep's context child: the environment fingerprint and the matmul rate, measured together.

It runs in a child so the job's own process never creates a CUDA context that would hold memory the cells
need.
"""

from __future__ import annotations

from typing import Any

import torch

from padbench.contract.spec import Dtype
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.runtime.device import TORCH_DTYPES
from padbench.worker.runtime.environment import collect_environment
from padbench.worker.runtime.isolation import ChildContext
from padbench.worker.runtime.peaks import peak_flops


def measure_context(ctx: ChildContext, device_name: str, dtype: Dtype, seeds: dict[str, int]) -> dict[str, Any]:
    """Child entry point: the environment fingerprint and the matmul rate in the job's dtype."""
    device = torch.device(device_name)
    ctx.progress(0.0, f"{dtype} matmul rate")
    peak, source = peak_flops(device, TORCH_DTYPES[dtype])  # the datasheet figure, beside the measured one
    environment = collect_environment(device, dataset_digest=None, seeds=seeds, peak_flops=peak, peak_source=source)
    return {"environment": environment.model_dump(mode="json"),
            "matmul_tflops": measure_matmul_tflops(device, TORCH_DTYPES[dtype])}
