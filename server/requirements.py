"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>` and what its kind's policy adds (`padbench/kinds/<kind>/policy.py`): `device:cuda`
when its spec pins the GPU (or asks for several GPUs, or `all`, without `device: cpu`: its ranks need GPUs), and — for
padding jobs — `attention:<family>` for every attention family its strategies name (`flash`, `sdpa`,
`flex`, …) and `experts:<name>` for every experts implementation it names (`grouped_mm` runs only where torch
has a grouped matmul for the GPU). A spec's `gpu: H100` adds `gpu:h100` (its text in lower case).
A worker offers `kind:` for each job kind it runs, `device:<device>`, `attention:` for every attention family
it lists and `experts:` for every experts implementation it lists: a worker names, beside each kernel that runs
on it (`torch-flash-varlen`), the family that kernel implements (`torch-flash`), as the kernel itself declares
it, so no family is read out of a kernel's name here. A worker offers `gpu:<text>` for every such requirement
of a queued job whose text its GPU's name contains (in any case): containment is no exact match, so the claim
asks which texts queued jobs name. A worker with several GPUs offers it only when every one of them matches: a
throughput measured on one GPU model must never be taken on another.
A spec's `worker_labels: [nvlink]` adds `label:nvlink` for each label, and a worker offers `label:` for each
label its operator gave it: exact names, kept in lower case by the contract, so a job naming several labels
goes only to a worker carrying all of them.

How many GPUs a job takes is no capability string: the claim matches `jobs.gpus` against the worker's free
GPUs (see `server.queue.claim_next_job`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from padbench.contract.api import Capabilities
from padbench.contract.parallel import GpuRequest
from padbench.contract.spec import FLASH_KERNELS, AttentionName, JobSpecBase
from padbench.kinds.record import kind_spec

# `flash` means "the best flash implementation present", so any specific flash family satisfies it.
GENERIC_FLASH = "flash"
ATTENTION_FAMILIES: frozenset[str] = frozenset(get_args(AttentionName))
GPU_PREFIX = "gpu:"
LABEL_PREFIX = "label:"


def gpu_requirement(gpu: str) -> str:
    return GPU_PREFIX + gpu.casefold()


def job_requirements(spec: JobSpecBase) -> set[str]:
    gpu = {gpu_requirement(spec.gpu)} if spec.gpu is not None else set()
    labels = {LABEL_PREFIX + label for label in spec.worker_labels}
    policy = kind_spec(spec.kind).policy
    return {f"kind:{spec.kind}"} | policy.requirements(spec) | gpu | labels | ranks_requirements(spec)


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


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    families = set(ATTENTION_FAMILIES.intersection(capabilities.kernels))
    if families & (FLASH_KERNELS - {GENERIC_FLASH}):
        families.add(GENERIC_FLASH)
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | {f"attention:{name}" for name in families}
    offered |= {f"experts:{name}" for name in capabilities.experts}
    offered.add(f"device:{capabilities.device}")
    offered.update(LABEL_PREFIX + label for label in capabilities.labels)
    return offered
