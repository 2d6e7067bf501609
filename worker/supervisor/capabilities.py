"""What this worker can run: device, its GPUs (index, model and memory of each), attention kernels, job kinds.

Detection imports torch and may initialise CUDA, so it runs in a short spawned child (`run_in_child`);
the supervisor parent only ever sees the resulting plain document. The child sees the GPUs the worker was
given (`--gpus`, through CUDA_VISIBLE_DEVICES), or else every GPU visible to the worker, and names each as
CUDA_VISIBLE_DEVICES names it, so a job's child can be handed exactly the ones it holds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from padbench.contract.api import Capabilities
from padbench.contract.attention_pick import AUTO_ATTENTION_KINDS
from padbench.contract.kernel_families import AUTO_ATTENTION
from padbench.contract.kinds import JOB_KINDS
from padbench.worker.jobs import get_job_runner
from padbench.worker.runtime.isolation import ChildContext, run_in_child
from padbench.worker.supervisor.gpus import visible_devices

log = logging.getLogger("padbench.worker")

DETECT_TIMEOUT_S = 120.0


class CapabilityError(RuntimeError):
    pass


def visible_gpu_ids(visible: str | None, count: int) -> list[str]:
    """How CUDA_VISIBLE_DEVICES names each of the `count` GPUs CUDA enumerates: its entries in order when
    it is set (CUDA stops at the first entry it cannot find), else the indices 0…count-1."""
    if visible is None:
        return [str(index) for index in range(count)]
    return [entry.strip() for entry in visible.split(",") if entry.strip()][:count]


def detect_in_child(ctx: ChildContext) -> dict[str, Any]:
    """Child-process target: probe the GPUs this process sees (after CUDA_VISIBLE_DEVICES applied)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    names = visible_gpu_ids(os.environ.get("CUDA_VISIBLE_DEVICES"), count)
    gpus = []
    for position, index in enumerate(names):
        properties = torch.cuda.get_device_properties(position)
        gpus.append({"index": index, "name": properties.name, "memory_bytes": int(properties.total_memory)})
    device = "cuda" if gpus else "cpu"
    by_kind = runnable_kernel_names(device)
    return {
        "device": device,
        "gpu_name": gpus[0]["name"] if gpus else None,
        "gpu_memory_bytes": gpus[0]["memory_bytes"] if gpus else None,
        "gpus": gpus,
        "kernels": sorted({name for names in by_kind.values() for name in names}),
        "kernels_by_kind": by_kind,
        "experts": runnable_experts(device),
        "job_kinds": list(JOB_KINDS),
    }


def runnable_kernel_names(device: str) -> dict[str, list[str]]:
    """Per kind, every name a spec of that kind may use for attention that runs here, as its runner lists them
    (families; an attention sweep's kernels), and `auto` for the kinds whose jobs it picks a family for: the
    server matches a job's names against its own kind's."""
    return {kind: sorted([*get_job_runner(kind).kernel_names(device),
                          *([AUTO_ATTENTION] if kind in AUTO_ATTENTION_KINDS else [])]) for kind in JOB_KINDS}


def runnable_experts(device: str) -> list[str]:
    """The experts implementations of mixtures of experts that run here: the server matches a job's names."""
    import torch

    from padbench.worker.engine.model.experts import EXPERTS_IMPLEMENTATIONS

    return sorted(name for name, implementation in EXPERTS_IMPLEMENTATIONS.items()
                  if implementation.unavailable_reason(torch.device(device)) is None)


def checked_gpus(capabilities: Capabilities, wanted: Sequence[str] | None) -> Capabilities:
    """The capabilities, once every GPU the worker was given (`wanted`) proved visible. Without CUDA at all
    the worker runs CPU jobs, as it always did, and says so."""
    found = [gpu.index for gpu in capabilities.gpus]
    if wanted and capabilities.device != "cuda":
        log.warning("GPUs %s were given, but this machine has no CUDA device: running as a CPU worker",
                    ",".join(wanted))
    elif wanted and found != list(wanted):
        missing = [gpu for gpu in wanted if gpu not in found]
        raise CapabilityError(f"--gpus {','.join(wanted)}: CUDA found only {','.join(found) or 'none'} of them "
                              f"(not {','.join(missing)}; `nvidia-smi -L` lists this machine's GPUs)")
    return capabilities


def detect_capabilities(
    gpus: Sequence[str] | None = None,
    *,
    timeout_s: float = DETECT_TIMEOUT_S,
    should_stop: Callable[[], bool] | None = None,
) -> Capabilities:
    """What this worker runs, seeing only `gpus` (None: every GPU visible to it)."""
    report = run_in_child(
        f"{__name__}:detect_in_child", timeout_s=timeout_s, env=visible_devices(gpus or ()), should_stop=should_stop
    )
    if report.outcome != "ok":
        raise CapabilityError(f"could not detect this worker's capabilities ({report.outcome}): {report.error}")
    return checked_gpus(Capabilities.model_validate(report.value), gpus)
