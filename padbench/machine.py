"""What this machine can run, found in milliseconds and without torch: commands that only write or check a
spec (`padbench init`, the start of `padbench run`) answer before any heavy import.

The check is the NVIDIA driver's view, not CUDA's: a GPU the driver lists may still be unusable by this
torch build, which the job itself reports when it starts. It errs on the side of "there is a GPU", so a
GPU machine is never told it has none.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# The share of a CPU's fp32 matrix-multiply rate a model's forward reaches, per dtype: about half in fp32
# (gpt2-seed on 2 cores of an AMD EPYC), while the same run in bf16 took over fifteen times as long (most
# CPUs have no fast bf16 or fp16 matrix instructions). `padbench run` and the server's claim judge by it.
CPU_SHARE_OF_MATMUL = {"fp32": 0.5, "bf16": 0.03, "fp16": 0.03}
# The driver lists each GPU it manages here (Linux, containers with the NVIDIA runtime included).
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
DEVICE_NODES = Path("/dev")


def cuda_gpu_present() -> bool:
    """Whether a CUDA GPU is visible to jobs started from this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False  # hidden on purpose: torch sees no GPU either
    try:
        if any(DRIVER_GPUS.iterdir()):
            return True
    except OSError:
        pass
    if any(DEVICE_NODES.glob("nvidia[0-9]*")):
        return True
    return shutil.which("nvidia-smi") is not None  # WSL and unusual layouts keep the tool, not the nodes



def visible_gpu_count() -> int:
    """How many GPUs jobs started from this process see (CUDA_VISIBLE_DEVICES first, else the driver's list)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([gpu for gpu in visible.split(",") if gpu.strip() not in ("", "-1")])
    try:
        return sum(1 for _ in DRIVER_GPUS.iterdir())
    except OSError:
        return len(list(DEVICE_NODES.glob("nvidia[0-9]*")))
