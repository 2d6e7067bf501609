"""`torch-flash`: torch's own copy of FlashAttention-2: SDPA pinned to its flash backend for padded rows, the
varlen op for packs and the flash forward reading the KV cache in place for decoding. Pinned, it raises where
the flash kernel cannot run rather than falling back to another backend."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ENGINE = "padbench.worker.engine"
SWEEP = "padbench.worker.jobs.attention.bindings"
NO_MASK = "the flash backend of SDPA takes no attention mask; use `varlen` for documents"

FAMILY = KernelFamily(
    name="torch-flash",
    description="torch's FlashAttention-2 (SDPA's flash backend, varlen_attn, the KV-cache flash forward)",
    # SDPA's flash backend takes no mask and no window: a model whose window sequences outgrow is refused.
    padded=KernelDeclaration("torch-flash", f"{ENGINE}.attention.padded.TorchFlashPadded", half_precision_only=True),
    packed=KernelDeclaration("torch-flash-varlen", f"{ENGINE}.attention.packed.TorchFlashVarlen",
                             half_precision_only=True, applies_window=True),
    decode=KernelDeclaration("torch-flash-kvcache", f"{ENGINE}.decoding.kernels.TorchFlashDecode",
                             half_precision_only=True, applies_window=True),
    sweep=(SweepDeclaration("sdpa-flash", f"{SWEEP}.SDPA_FLASH", dense_only=NO_MASK),
           SweepDeclaration("varlen", f"{SWEEP}.VARLEN")),
    # Usually the older build of FA2 on a machine: last among the flash implementations.
    flash_rank=3,
)
