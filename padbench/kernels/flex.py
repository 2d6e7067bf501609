"""`flex`: FlexAttention with block masks built per batch, so fully masked tiles are skipped; soft-capping and
sinks run inside its fused kernel."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ENGINE = "padbench.worker.engine"
EVERY_FEATURE = {"applies_softcap": True, "applies_sinks": True, "applies_window": True}

FAMILY = KernelFamily(
    name="flex",
    description="FlexAttention with a block mask per batch (transformers' flex_attention)",
    aliases=("flex_attention",),
    padded=KernelDeclaration("flex-padding-mask", f"{ENGINE}.attention.padded.FlexPadded", **EVERY_FEATURE),
    packed=KernelDeclaration("flex-document-mask", f"{ENGINE}.attention.packed.FlexDocumentMask", **EVERY_FEATURE),
    decode=KernelDeclaration("flex-kvcache", f"{ENGINE}.decoding.flex_decode.FlexDecode", **EVERY_FEATURE),
    sweep=(SweepDeclaration("flex", "padbench.worker.jobs.attention.bindings.FLEX"),),
    sweep_alias="flex",
)
