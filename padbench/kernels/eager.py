"""`eager`: the score matrix materialised, masked, soft-maxed and multiplied by the values: the plain
implementation (transformers' `eager`), with every model feature, that the others are checked against."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ENGINE = "padbench.worker.engine"
EVERY_FEATURE = {"applies_softcap": True, "applies_sinks": True, "applies_window": True}

FAMILY = KernelFamily(
    name="eager",
    description="the score matrix materialised with the layout's mask (transformers' eager attention)",
    aliases=("eager",),
    padded=KernelDeclaration("eager", f"{ENGINE}.attention.padded.EagerPadded", **EVERY_FEATURE),
    packed=KernelDeclaration("eager-block-mask", f"{ENGINE}.attention.packed.EagerBlockMask", **EVERY_FEATURE),
    decode=KernelDeclaration("eager-kvcache", f"{ENGINE}.decoding.kernels.EagerDecode", **EVERY_FEATURE),
    sweep=(SweepDeclaration("naive", "padbench.worker.jobs.attention.bindings.NAIVE", score_matrices=(2, 4)),),
    sweep_alias="naive",
)
