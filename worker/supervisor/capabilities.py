"""What this worker can run: device, GPU model and memory, attention kernels, job kinds.

Detection imports torch and may initialise CUDA, so it runs in a short spawned child (`run_in_child`);
the supervisor parent only ever sees the resulting plain document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from padbench.contract.api import Capabilities
from padbench.worker.jobs import PLUGIN_MODULES, get_job_runner
from padbench.worker.runtime.isolation import ChildContext, run_in_child

DETECT_TIMEOUT_S = 120.0


class CapabilityError(RuntimeError):
    pass


def detect_in_child(ctx: ChildContext) -> dict[str, Any]:
    """Child-process target: probe the device this process sees (after CUDA_VISIBLE_DEVICES applied)."""
    import torch

    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        device, gpu_name, memory = "cuda", properties.name, int(properties.total_memory)
    else:
        device, gpu_name, memory = "cpu", None, None
    return {
        "device": device,
        "gpu_name": gpu_name,
        "gpu_memory_bytes": memory,
        "kernels": runnable_kernel_names(device),
        "job_kinds": list(PLUGIN_MODULES),
    }


def runnable_kernel_names(device: str) -> list[str]:
    """Every name a spec may use for a kernel that runs here, as each kind's runner lists them: the server
    matches a job's names against these."""
    return sorted({name for kind in PLUGIN_MODULES for name in get_job_runner(kind).kernel_names(device)})


def gpu_environment(gpu: str | None) -> dict[str, str]:
    """The environment a child needs to see only the worker's GPU (or its whole machine when None)."""
    return {} if gpu is None else {"CUDA_VISIBLE_DEVICES": gpu}


def detect_capabilities(
    gpu: str | None = None,
    *,
    timeout_s: float = DETECT_TIMEOUT_S,
    should_stop: Callable[[], bool] | None = None,
) -> Capabilities:
    report = run_in_child(
        f"{__name__}:detect_in_child", timeout_s=timeout_s, env=gpu_environment(gpu), should_stop=should_stop
    )
    if report.outcome != "ok":
        raise CapabilityError(f"could not detect this worker's capabilities ({report.outcome}): {report.error}")
    return Capabilities.model_validate(report.value)
