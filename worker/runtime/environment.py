"""The environment fingerprint stored with every result, so a reader can judge whether two are comparable.

Every field is read from the running system; anything that cannot be read (no GPU, no NVML, a library
that is not installed) is None rather than a guess.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import platform
import shutil
import socket
import subprocess
from collections.abc import Mapping
from datetime import datetime, timezone

import torch

import padbench
from padbench.contract.results import Environment
from padbench.worker.runtime.memory import nvml_session

# Distribution names each optional library has been published under, newest first.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "transformers": ("transformers",),
    "datasets": ("datasets",),
    "flash_attn": ("flash-attn", "flash_attn"),
    "flash_attn_cute": ("flash-attn-4", "fa4", "flash-attn-cute"),
}


def package_version(library: str) -> str | None:
    for distribution in _DISTRIBUTIONS[library]:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(distribution)
    return None


def flash_attn_cute_version() -> str | None:
    """flash-attn-4 ships `flash_attn.cute`, sometimes inside the flash-attn distribution itself."""
    with contextlib.suppress(ImportError, ValueError):
        if importlib.util.find_spec("flash_attn.cute") is None:
            return None
        return package_version("flash_attn_cute") or package_version("flash_attn")
    return None


def nvidia_driver_version() -> str | None:
    with nvml_session() as nvml:
        if nvml is None:  # not installed or no driver: the version is unknown, not an error
            return None
        version = nvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)


def _gpu_fields(device: torch.device) -> dict[str, object]:
    if device.type != "cuda":
        return {}
    properties = torch.cuda.get_device_properties(device)
    return {
        "gpu_name": properties.name,
        "gpu_memory_bytes": int(properties.total_memory),
        "gpu_count": torch.cuda.device_count(),
        "driver": nvidia_driver_version(),
        "cuda": torch.version.cuda,
    }


def collect_environment(device: torch.device, *, dataset_digest: str | None, seeds: Mapping[str, int],
                        peak_flops: float | None, peak_source: str | None) -> Environment:
    """`peak_flops` is the device peak (FLOP/s) used for MFU, for the job's dtype."""
    return Environment(
        hostname=socket.gethostname(),
        device=device.type,
        python=platform.python_version(),
        padbench=padbench.__version__,
        torch=torch.__version__,
        transformers=package_version("transformers"),
        flash_attn=package_version("flash_attn"),
        flash_attn_cute=flash_attn_cute_version(),
        datasets=package_version("datasets"),
        dataset_digest=dataset_digest,
        seeds=dict(seeds),
        peak_tflops=None if peak_flops is None else peak_flops / 1e12,
        peak_source=peak_source,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **_gpu_fields(device),  # type: ignore[arg-type]
    )


TOPOLOGY_TIMEOUT_S = 20.0
TOPOLOGY_LIMIT = 20_000  # characters: an 8-GPU matrix with its legend is ~3,000


def gpu_topology() -> str | None:
    """How the GPUs connect (NVLink, PCIe switches, NUMA nodes), as `nvidia-smi topo -m` prints it for the
    GPUs this process sees; None where the tool is missing or fails (the figure is then unknown)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        printed = subprocess.run([tool, "topo", "-m"], capture_output=True, text=True, timeout=TOPOLOGY_TIMEOUT_S,
                                 check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return printed.strip()[:TOPOLOGY_LIMIT] or None
