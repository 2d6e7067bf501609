"""`flash-attn-3`: FlashAttention-3, the `flash_attn_interface` module built from flash-attn's hopper/ folder
(https://github.com/Dao-AILab/flash-attention/tree/main/hopper), for Hopper GPUs: transformers'
`flash_attention_3`. Padded rows and varlen packs through its `flash_attn_func` and `flash_attn_varlen_func`, and
in the sweep those and its float8 forward. Where flash_attn_interface is not installed, the worker refuses the
kernel saying so; it is no stand-in for FlashAttention-2 or -4. It has no KV-cache path in padbench."""

from __future__ import annotations

from padbench.contract.kernel_family import KernelDeclaration, KernelFamily, SweepDeclaration

ATTENTION = "padbench.worker.engine.attention"
SWEEP = "padbench.worker.jobs.attention.bindings"
# FlashAttention-3 takes softcap and a (left, right) window; it has no attention sinks' learnable_sink.
FEATURES = {"half_precision_only": True, "applies_softcap": True, "applies_window": True}
FORWARD_ONLY = "FlashAttention-3's float8 path is a forward kernel: it has no backward to time"
DENSE_ONLY = "the FP8 row measures padded (dense) problems; use `flash-attn-cute` or `varlen` for documents"

FAMILY = KernelFamily(
    name="flash-attn-3",
    description="FlashAttention-3, flash_attn_interface of flash-attn's hopper build (transformers' flash_attention_3)",
    aliases=("flash_attention_3",),
    padded=KernelDeclaration("flash-attn-3", f"{ATTENTION}.padded.FlashAttn3Padded", **FEATURES),
    packed=KernelDeclaration("flash-attn-3-varlen", f"{ATTENTION}.packed.FlashAttn3Varlen", **FEATURES),
    sweep=(
        SweepDeclaration(
            "flash-attn-3",
            f"{SWEEP}.FLASH_ATTN_3",
            needs_cuda=True,
            half_precision_only=True,
            min_compute_capability=(9, 0),
        ),
        # The "FA3 FP8" column of the tables users quote: float8 tensor cores arrived with Hopper.
        SweepDeclaration(
            "flash-attn-fp8",
            f"{SWEEP}.FLASH_ATTN_FP8",
            needs_cuda=True,
            half_precision_only=True,
            min_compute_capability=(9, 0),
            dense_only=DENSE_ONLY,
            forward_only=FORWARD_ONLY,
        ),
    ),
    sweep_alias="flash-attn-3",
)
