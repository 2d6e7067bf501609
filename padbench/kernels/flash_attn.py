"""`flash-attn`: FlashAttention-2 of the flash_attn package, padded rows and varlen packs. It has no KV-cache
path in padbench, so generate jobs refuse it at submission."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ATTENTION = "padbench.worker.engine.attention"
FEATURES = {"half_precision_only": True, "applies_softcap": True, "applies_window": True}

FAMILY = KernelFamily(
    name="flash-attn",
    description="FlashAttention-2, the flash_attn package (transformers' flash_attention_2)",
    aliases=("flash_attention_2",),
    padded=KernelDeclaration("flash-attn", f"{ATTENTION}.padded.FlashAttnPadded", **FEATURES),
    packed=KernelDeclaration("flash-attn-varlen", f"{ATTENTION}.packed.FlashAttnVarlen", **FEATURES),
    sweep=(SweepDeclaration("flash-attn", "padbench.worker.jobs.attention.bindings.FLASH_ATTN", needs_cuda=True,
                            half_precision_only=True),),
    sweep_alias="flash-attn",
    flash_rank=2,
)
