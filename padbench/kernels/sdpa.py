"""`sdpa`: torch's scaled_dot_product_attention with the layout's mask, its backend chosen by torch (what
transformers' `sdpa` does); in the sweep, SDPA pinned to its math and memory-efficient backends."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ENGINE = "padbench.worker.engine"
SWEEP = "padbench.worker.jobs.attention.bindings"

FAMILY = KernelFamily(
    name="sdpa",
    description="torch's scaled_dot_product_attention with a padding or block-diagonal mask, backend chosen by torch",
    aliases=("sdpa",),
    padded=KernelDeclaration("sdpa", f"{ENGINE}.attention.padded.SdpaPadded", applies_window=True),
    packed=KernelDeclaration("sdpa-block-mask", f"{ENGINE}.attention.packed.SdpaBlockMask", applies_window=True),
    decode=KernelDeclaration("sdpa-kvcache", f"{ENGINE}.decoding.kernels.SdpaDecode", applies_window=True),
    sweep=(SweepDeclaration("sdpa-math", f"{SWEEP}.SDPA_MATH", score_matrices=(2, 4)),
           SweepDeclaration("sdpa-efficient", f"{SWEEP}.SDPA_EFFICIENT")),
)
