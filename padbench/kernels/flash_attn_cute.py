"""`flash-attn-cute`: FlashAttention-4, the flash-attn-cute package's CuTe DSL kernels (`flash_attn.cute`), for
Hopper and Blackwell GPUs: transformers' `flash_attention_4`. Padded rows and packs, and a sweep column. Where
flash_attn.cute is not installed, the worker refuses the kernel saying so. It has no KV-cache path in padbench."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ATTENTION = "padbench.worker.engine.attention"
SWEEP = "padbench.worker.jobs.attention.bindings"
FEATURES = {"half_precision_only": True, "applies_softcap": True, "applies_sinks": True, "applies_window": True}

FAMILY = KernelFamily(
    name="flash-attn-cute",
    description="FlashAttention-4: the flash-attn-cute package's CuTe DSL kernels (flash_attn.cute)",
    aliases=("flash_attention_4",),
    padded=KernelDeclaration("flash-attn-cute", f"{ATTENTION}.padded.FlashAttnCutePadded", **FEATURES),
    packed=KernelDeclaration("flash-attn-cute-varlen", f"{ATTENTION}.packed.FlashAttnCuteVarlen", **FEATURES),
    sweep=(SweepDeclaration("flash-attn-cute", f"{SWEEP}.FLASH_ATTN_CUTE", needs_cuda=True, half_precision_only=True),),
    sweep_alias="flash-attn-cute",
    # flash-attn-4's forward ran 1.7–1.8× as fast as torch's FA2 on an H200 at 2K–16K tokens (B8 H32 D64, the
    # attention sweep in docs/benchmarks.md): first among the flash implementations.
    flash_rank=1,
)
