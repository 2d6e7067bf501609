"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>` and what its kind's policy adds (`padbench/kinds/<kind>/policy.py`): `device:cuda`
when its spec pins the GPU (or asks for several GPUs, or `all`, without `device: cpu`: its ranks need GPUs),
`attention:<kind>:<family>` for every attention family it names (`flash`, `sdpa`, `flex`, …; a padding job's
strategies, a generate job's KV-cache kernel; `auto`, which only a worker that picks kernels itself offers) and
`experts:<name>` for every experts implementation it names
(`grouped_mm` runs only where torch has a grouped matmul for the GPU). A spec's `gpu: H100` adds `gpu:h100` (its
text in lower case).
A worker offers `kind:` for each job kind it runs, `device:<device>`, `experts:` for every experts implementation
it lists, and `attention:<kind>:<family>` for every family it lists for that kind (`Capabilities.kernels_by_kind`),
with `flash` where a flash implementation is among them: a family that runs here for padding jobs but has no
KV-cache kernel is never offered to generate jobs. A worker from before the lists were per kind offers its one
list for every kind it runs, as it always did; jobs queued before requirements named their kind require
`attention:<family>`, which a worker offers for every family it lists for any kind.
A worker offers `gpu:<text>` for every such requirement of a queued job whose text its GPU's name contains (in any
case): containment is no exact match, so the claim asks which texts queued jobs name. A worker with several GPUs
offers it only when every one of them matches: a throughput measured on one GPU model must never be taken on
another.
A spec's `worker_labels: [nvlink]` adds `label:nvlink` for each label, and a worker offers `label:` for each
label its operator gave it: exact names, kept in lower case by the contract, so a job naming several labels
goes only to a worker carrying all of them.

A `device: auto` job whose work on a CPU is known from its spec (the cost estimate's FLOPs, over the share of
a CPU's matrix-multiply rate its dtype reaches) requires `cpu-work:<N>`, N the power of ten of that work; a
CPU worker that measured its rate offers `cpu-work:0` … `cpu-work:M`, M the power of ten of what it does
within its job timeout, so a GPU-sized job is never claimed by a CPU that would run it for hours. A worker
with GPUs, or one that measured nothing, offers every power.

How many GPUs a job takes is no capability string: the claim matches `jobs.gpus` against the worker's free
GPUs (see `server.queue.claim_next_job`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from padbench.contract.api import Capabilities
from padbench.contract.kernel_families import AUTO_ATTENTION, BEST_FLASH, KERNEL_FAMILIES, attention_names
from padbench.contract.parallel import GpuRequest
from padbench.contract.spec import JobSpecBase
from padbench.kinds.policy import ATTENTION_PREFIX, attention_requirement
from padbench.kinds.record import kind_spec
from padbench.machine import CPU_SHARE_OF_MATMUL
from padbench.server.cost import job_cost

GPU_PREFIX = "gpu:"
LABEL_PREFIX = "label:"
CPU_WORK_PREFIX = "cpu-work:"
# Powers of ten of FLOPs offered by a worker that takes any job: beyond any job the cost limits admit.
MAX_CPU_WORK_POWER = 30


def gpu_requirement(gpu: str) -> str:
    return GPU_PREFIX + gpu.casefold()


def job_requirements(spec: JobSpecBase) -> set[str]:
    gpu = {gpu_requirement(spec.gpu)} if spec.gpu is not None else set()
    labels = {LABEL_PREFIX + label for label in spec.worker_labels}
    policy = kind_spec(spec.kind).policy
    return ({f"kind:{spec.kind}"} | policy.requirements(spec) | gpu | labels | ranks_requirements(spec)
            | cpu_work_requirements(spec))


def work_power(flops: float) -> int:
    """The power of ten of `flops` (rounded down: a job within ten times a worker's reach is still offered)."""
    return min(MAX_CPU_WORK_POWER, max(0, math.floor(math.log10(max(flops, 1.0)))))


def cpu_work_on_a_cpu(spec: JobSpecBase) -> float | None:
    """The fp32 matrix-multiply work that would take as long as the job on a CPU; None when its size is unknown."""
    flops = job_cost(spec).flops
    if flops is None:
        return None
    return flops / CPU_SHARE_OF_MATMUL.get(str(getattr(spec, "dtype", "fp32")), CPU_SHARE_OF_MATMUL["fp32"])


def cpu_work_requirements(spec: JobSpecBase) -> set[str]:
    """`cpu-work:<N>` for a `device: auto` job of known size (a job on `device: cpu` asked for a CPU)."""
    if getattr(spec, "device", None) != "auto":
        return set()
    work = cpu_work_on_a_cpu(spec)
    return set() if work is None else {CPU_WORK_PREFIX + str(work_power(work))}


def cpu_work_offers(capabilities: Capabilities) -> set[str]:
    """Every power of ten of work up to what this CPU worker does within its job timeout; every one for a
    worker with GPUs or one that measured nothing."""
    reach = capabilities.cpu_flops_per_job if capabilities.device == "cpu" else None
    top = MAX_CPU_WORK_POWER if reach is None else work_power(reach)
    return {CPU_WORK_PREFIX + str(power) for power in range(top + 1)}


def stored_gpus(spec: JobSpecBase) -> int:
    """The job's GPU count as the jobs.gpus column holds it (`all` is ALL_GPUS)."""
    return GpuRequest.of(spec).stored


def ranks_requirements(spec: JobSpecBase) -> set[str]:
    """A job on several GPUs (or `all`) needs a worker with GPUs, unless its ranks are CPU processes."""
    return {"device:cuda"} if GpuRequest.of(spec).spans_gpus else set()


def gpu_names(capabilities: Capabilities) -> list[str]:
    """The model names of the worker's GPUs, in lower case (a CPU worker: none)."""
    if capabilities.device != "cuda":
        return []
    if capabilities.gpus:
        return [gpu.name.casefold() for gpu in capabilities.gpus]
    return [capabilities.gpu_name.casefold()] if capabilities.gpu_name else []


def gpu_capabilities(capabilities: Capabilities, wanted: Iterable[str]) -> set[str]:
    """The `gpu:` requirements among `wanted` that every one of this worker's GPU names satisfies."""
    names = gpu_names(capabilities)
    return {need for need in wanted
            if need.startswith(GPU_PREFIX) and names and all(need[len(GPU_PREFIX):] in name for name in names)}


def attention_offers(capabilities: Capabilities) -> set[str]:
    """`attention:<kind>:<family>` for every family the worker lists for each kind, `flash` where a flash
    implementation is among them; and `attention:<family>` for any of them, which jobs queued before requirements
    named their kind require. A worker's kernels' names are no family and are offered nothing."""
    by_kind = capabilities.kernels_by_kind or {kind: capabilities.kernels for kind in capabilities.job_kinds}
    offered: set[str] = set()
    for kind, names in by_kind.items():
        families = set(attention_names()).intersection(names)
        if any(KERNEL_FAMILIES.get(name).flash_rank is not None for name in families - {BEST_FLASH}):
            families.add(BEST_FLASH)
        offered |= {attention_requirement(kind, name) for name in families}
        if AUTO_ATTENTION in names:  # a worker that picks the kernel itself for jobs of this kind
            offered.add(attention_requirement(kind, AUTO_ATTENTION))
        offered |= {ATTENTION_PREFIX + name for name in families}
    return offered


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | attention_offers(capabilities)
    offered |= {f"experts:{name}" for name in capabilities.experts}
    offered.add(f"device:{capabilities.device}")
    offered.update(LABEL_PREFIX + label for label in capabilities.labels)
    return offered | cpu_work_offers(capabilities)
