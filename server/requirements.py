"""Which workers may run which jobs, as plain capability strings matched in SQL.

A job requires `kind:<kind>`, `device:cuda` when its spec pins the GPU, and — for padding jobs —
`attention:<family>` for every attention family its strategies name (`flash`, `sdpa`, `flex`, …).
A worker offers `kind:` for each job kind it runs, `device:<device>`, and `attention:` for the family of
each kernel it reports. Worker kernels are named `<family>` or `<family>-<variant>` (`sdpa`,
`flex-padding-mask`, `torch-flash-varlen`): the family is the longest spec attention name that prefixes
the kernel name. Attention-sweep jobs name sweep kernels, which the sweep records cell by cell as
`unsupported` where they cannot run, so they are not gated on kernels.
"""

from __future__ import annotations

from typing import get_args

from padbench.contract.api import Capabilities
from padbench.contract.spec import FLASH_KERNELS, AttentionJobSpec, AttentionName, PaddingJobSpec

# `flash` means "the best flash implementation present", so any specific flash family satisfies it.
GENERIC_FLASH = "flash"
ATTENTION_FAMILIES: tuple[str, ...] = tuple(sorted(get_args(AttentionName), key=len, reverse=True))


def kernel_family(kernel_name: str) -> str | None:
    """`flash-attn-cute-varlen` → `flash-attn-cute`; None for a name of no known family."""
    for family in ATTENTION_FAMILIES:  # longest first, so flash-attn-cute wins over flash-attn
        if kernel_name == family or kernel_name.startswith(family + "-"):
            return family
    return None


def job_requirements(spec: PaddingJobSpec | AttentionJobSpec) -> set[str]:
    required = {f"kind:{spec.kind}"}
    if spec.device == "cuda":
        required.add("device:cuda")
    if isinstance(spec, PaddingJobSpec):
        required |= {f"attention:{spec.attention_for(strategy)}" for strategy in spec.strategies}
    return required


def offered_capabilities(capabilities: Capabilities) -> set[str]:
    families = {family for family in map(kernel_family, capabilities.kernels) if family is not None}
    if families & (FLASH_KERNELS - {GENERIC_FLASH}):
        families.add(GENERIC_FLASH)
    offered = {f"kind:{kind}" for kind in capabilities.job_kinds} | {f"attention:{name}" for name in families}
    offered.add(f"device:{capabilities.device}")
    return offered
