"""The attention sweep's FP8 row: FlashAttention-3's float8 forward (`flash_attn_interface`, Hopper and later).

The Flash-Attention tables users quote have an "FA3 FP8" column: the forward on float8 (e4m3) queries, keys
and values, each scaled into e4m3's range by a per-(batch, head) factor that the kernel multiplies back
(`q_descale`, `k_descale`, `v_descale`). The inputs are quantised once at bind time, as an inference stack
holds its KV cache in float8, so the timed call is the kernel alone; its error against float64 is the cell's
error, as for every other row. FlashAttention-3 is a separate build of flash-attn (its `hopper/` folder, the
`flash_attn_interface` module, https://github.com/Dao-AILab/flash-attention#flashattention-3-beta-release);
where it is absent, or the GPU has no float8 tensor cores, every cell of the row says so. What it needs and never
runs (a backward, documents) is declared with the row, in `padbench/kernels/flash_attn_3.py`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType

import torch

from padbench.worker.engine.attention import libraries
from padbench.worker.jobs.attention.inputs import InputSet, Problem

FP8 = torch.float8_e4m3fn


def fa3_module() -> ModuleType:
    module = libraries.optional_module("flash_attn_interface")
    function = getattr(module, "flash_attn_func", None)
    if module is None or function is None or "q_descale" not in inspect.signature(function).parameters:
        raise libraries.KernelUnavailable("flash-attn-fp8", "FlashAttention-3 (the flash_attn_interface module of "
                                                      "flash-attn's hopper build, with its float8 forward) is not "
                                                      "importable")
    return module


def quantised(tensor: torch.Tensor, groups: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """`tensor` (batch, seq, heads, dim) in e4m3, scaled to use its range, and the float32 factors that undo the
    scaling, one per (batch, group of `groups` heads): FlashAttention-3 takes one per key/value head, which the
    query heads of its group share."""
    amax = tensor.abs().amax(dim=(1, 3)).float()
    amax = amax.view(amax.shape[0], -1, groups).amax(dim=2).clamp_min(1e-12)
    scale = torch.finfo(FP8).max / amax
    scaled = (tensor.float() * scale.repeat_interleave(groups, dim=1)[:, None, :, None]).to(FP8)
    return scaled, (1.0 / scale).contiguous()


def bind_fp8(problem: Problem, inputs: InputSet) -> Callable[[], torch.Tensor]:
    function = fa3_module().flash_attn_func
    q, q_descale = quantised(inputs.query, groups=problem.heads // problem.kv_heads)
    (k, k_descale), (v, v_descale) = quantised(inputs.key), quantised(inputs.value)
    out_dtype = inputs.query.dtype

    def call() -> torch.Tensor:
        out = function(q, k, v, causal=problem.causal, q_descale=q_descale, k_descale=k_descale,
                       v_descale=v_descale)
        out = out[0] if isinstance(out, tuple) else out
        return out.to(out_dtype)

    return call
