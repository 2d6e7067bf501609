"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>` and what its kind's policy adds (`server.kinds`): `device:cuda` when its spec
pins the GPU, and — for padding jobs — `attention:<family>` for every attention family its strategies name
(`flash`, `sdpa`, `flex`, …). A spec's `gpu: H100` adds `gpu:h100` (its text in lower case).
A worker offers `kind:` for each job kind it runs, `device:<device>`, and `attention:` for every attention
family it lists: a worker names, beside each kernel that runs on it (`torch-flash-varlen`), the family that
kernel implements (`torch-flash`), as the kernel itself declares it, so no family is read out of a kernel's
name here. A worker offers `gpu:<text>` for every such requirement of a queued job whose text its GPU's name
contains (in any case): containment is no exact match, so the claim asks which texts queued jobs name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from padbench.contract.api import Capabilities
from padbench.contract.spec import FLASH_KERNELS, AttentionName, JobSpecBase
from padbench.server.kinds import policy_for

# `flash` means "the best flash implementation present", so any specific flash family satisfies it.
GENERIC_FLASH = "flash"
ATTENTION_FAMILIES: frozenset[str] = frozenset(get_args(AttentionName))
GPU_PREFIX = "gpu:"


def gpu_requirement(gpu: str) -> str:
    return GPU_PREFIX + gpu.casefold()


def job_requirements(spec: JobSpecBase) -> set[str]:
    gpu = {gpu_requirement(spec.gpu)} if spec.gpu is not None else set()
    return {f"kind:{spec.kind}"} | policy_for(spec).requirements(spec) | gpu


def gpu_capabilities(capabilities: Capabilities, wanted: Iterable[str]) -> set[str]:
    """The `gpu:` requirements among `wanted` that this worker's GPU name satisfies (a CPU worker: none)."""
    name = (capabilities.gpu_name or "").casefold() if capabilities.device == "cuda" else ""
    return {need for need in wanted if need.startswith(GPU_PREFIX) and name and need[len(GPU_PREFIX):] in name}


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    families = set(ATTENTION_FAMILIES.intersection(capabilities.kernels))
    if families & (FLASH_KERNELS - {GENERIC_FLASH}):
        families.add(GENERIC_FLASH)
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | {f"attention:{name}" for name in families}
    offered.add(f"device:{capabilities.device}")
    return offered
