"""`math`: a kernel family of the tests' own — SDPA pinned to its math backend — declared in this one module, as
every family in padbench/kernels/ is. Its kernels are the classes of `tests/plugins/math_kernels.py`, named by
dotted path: the contract never imports them."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily

KERNELS = "tests.plugins.math_kernels"

FAMILY = KernelFamily(
    name="math",
    description="SDPA pinned to its math backend (a family only the tests define)",
    aliases=("math_attention",),
    padded=KernelDeclaration("math-padding-mask", f"{KERNELS}.MathPadded", applies_window=True),
    packed=KernelDeclaration("math-block-mask", f"{KERNELS}.MathBlockMask", applies_window=True),
    decode=KernelDeclaration("math-kvcache", f"{KERNELS}.MathDecode", applies_window=True),
)
