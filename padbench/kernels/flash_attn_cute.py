"""`flash-attn-cute`: the FlashAttention-3/4 class, for Hopper and Blackwell GPUs: flash-attn-4's CuTe DSL kernels
(`flash_attn.cute`) for padded rows and packs and, in the sweep, also FlashAttention-3's float8 forward
(`flash_attn_interface`, flash-attn's hopper build). transformers' `flash_attention_3` runs as this family; where
flash_attn.cute is not installed, the worker refuses it saying so. It has no KV-cache path in padbench."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ATTENTION = "padbench.worker.engine.attention"
SWEEP = "padbench.worker.jobs.attention.bindings"
FEATURES = {"half_precision_only": True, "applies_softcap": True, "applies_sinks": True, "applies_window": True}
FORWARD_ONLY = "FlashAttention-3's float8 path is a forward kernel: it has no backward to time"
DENSE_ONLY = "the FP8 row measures padded (dense) problems; use `flash-attn-cute` or `varlen` for documents"

FAMILY = KernelFamily(
    name="flash-attn-cute",
    description="the FlashAttention-3/4 class: flash-attn-4's CuTe DSL kernels (flash_attn.cute)",
    aliases=("flash_attention_3",),
    padded=KernelDeclaration("flash-attn-cute", f"{ATTENTION}.padded.FlashAttnCutePadded", **FEATURES),
    packed=KernelDeclaration("flash-attn-cute-varlen", f"{ATTENTION}.packed.FlashAttnCuteVarlen", **FEATURES),
    sweep=(SweepDeclaration("flash-attn-cute", f"{SWEEP}.FLASH_ATTN_CUTE", needs_cuda=True, half_precision_only=True),
           # The "FA3 FP8" column of the tables users quote: float8 tensor cores arrived with Hopper.
           SweepDeclaration("flash-attn-fp8", f"{SWEEP}.FLASH_ATTN_FP8", needs_cuda=True, half_precision_only=True,
                            min_compute_capability=(9, 0), dense_only=DENSE_ONLY, forward_only=FORWARD_ONLY)),
    sweep_alias="flash-attn-cute",
    # flash-attn-4's forward ran 1.7–1.8× as fast as torch's FA2 on an H200 at 2K–16K tokens (B8 H32 D64, the
    # attention sweep in docs/benchmarks.md): first among the flash implementations.
    flash_rank=1,
)
