"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>` and what its kind's policy adds (`server.kinds`): `device:cuda` when its spec
pins the GPU, and — for padding jobs — `attention:<family>` for every attention family its strategies name
(`flash`, `sdpa`, `flex`, …).
A worker offers `kind:` for each job kind it runs, `device:<device>`, and `attention:` for every attention
family it lists: a worker names, beside each kernel that runs on it (`torch-flash-varlen`), the family that
kernel implements (`torch-flash`), as the kernel itself declares it, so no family is read out of a kernel's
name here.
"""

from __future__ import annotations

from typing import get_args

from padbench.contract.api import Capabilities
from padbench.contract.spec import FLASH_KERNELS, AttentionName, JobSpecBase
from padbench.server.kinds import policy_for

# `flash` means "the best flash implementation present", so any specific flash family satisfies it.
GENERIC_FLASH = "flash"
ATTENTION_FAMILIES: frozenset[str] = frozenset(get_args(AttentionName))


def job_requirements(spec: JobSpecBase) -> set[str]:
    return {f"kind:{spec.kind}"} | policy_for(spec).requirements(spec)


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    families = set(ATTENTION_FAMILIES.intersection(capabilities.kernels))
    if families & (FLASH_KERNELS - {GENERIC_FLASH}):
        families.add(GENERIC_FLASH)
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | {f"attention:{name}" for name in families}
    offered.add(f"device:{capabilities.device}")
    return offered
