"""The device's memory bandwidth as a device-to-device copy achieves it, measured in the job that uses it.

Decoding reads every weight and the whole KV cache once per step, so its ceiling is memory bandwidth; a
copy of a buffer far larger than the caches reads and writes each byte once, and counts both.
"""

from __future__ import annotations

import numpy as np
import torch

from padbench.worker.engine.measure.timing import time_calls

COPY_BYTES = {"cuda": 1 << 30, "cpu": 1 << 26}  # far above any GPU's L2, and a quick pass on a CPU
COPY_WARMUP, COPY_REPEATS = 2, 10


def measure_copy_bytes_per_s(device: torch.device) -> float:
    """Median bytes moved per second (read + written) by a copy of a large buffer."""
    count = COPY_BYTES.get(device.type, COPY_BYTES["cpu"])
    source = torch.empty(count, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    for _ in range(COPY_WARMUP):
        target.copy_(source)
    seconds = time_calls([lambda: target.copy_(source)] * COPY_REPEATS, device)
    return 2.0 * count / float(np.median(seconds))
