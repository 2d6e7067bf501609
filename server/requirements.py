"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>`, one `kernel:<name>` per attention kernel it names, and `device:cuda` when
its spec pins the GPU. A worker offers `kind:` for each job kind it runs, `kernel:` for each kernel in
its capabilities, and `device:<device>`. The claim takes only jobs none of whose requirements are
missing from the worker's offer.
"""

from __future__ import annotations

from padbench.contract.api import Capabilities
from padbench.contract.spec import FLASH_KERNELS, AttentionJobSpec, PaddingJobSpec

# `flash` means "the best flash implementation present", so any specific flash kernel satisfies it.
GENERIC_FLASH = "flash"
SPECIFIC_FLASH_KERNELS = FLASH_KERNELS - {GENERIC_FLASH}


def _spec_kernels(spec: PaddingJobSpec | AttentionJobSpec) -> set[str]:
    if isinstance(spec, PaddingJobSpec):
        return {spec.attention_for(strategy) for strategy in spec.strategies}
    return set(spec.kernels)


def job_requirements(spec: PaddingJobSpec | AttentionJobSpec) -> set[str]:
    required = {f"kind:{spec.kind}"} | {f"kernel:{name}" for name in _spec_kernels(spec)}
    if spec.device == "cuda":
        required.add("device:cuda")
    return required


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    kernels = set(capabilities.kernels)
    if kernels & SPECIFIC_FLASH_KERNELS:
        kernels.add(GENERIC_FLASH)
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | {f"kernel:{name}" for name in kernels}
    offered.add(f"device:{capabilities.device}")
    return offered
