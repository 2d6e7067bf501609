"""FlexAttention calls, in the tensor convention of `ops`: compiled on CUDA, torch's unfused reference on CPU.

Gemma 2's soft-capping runs inside the fused kernel as a score_mod; attention sinks rescale the output by the
log-sum-exp flex returns (`ops.sink_rescaled`), since a score_mod cannot add the sink's column.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from padbench.worker.engine.attention.ops import first_tensor, is_gqa, sink_rescaled

# torch 2.9+ asks for FlexAttention's log-sum-exp with an AuxRequest (`return_aux`), earlier ones with
# `return_lse=True`; https://docs.pytorch.org/docs/stable/nn.attention.flex_attention.html
_AUX_REQUEST: Any = getattr(importlib.import_module("torch.nn.attention.flex_attention"), "AuxRequest", None)


@functools.cache
def _compiled_flex() -> Callable[..., Any]:
    # Dynamic shapes: every packed batch has a different total length, and one graph per length would
    # recompile on every batch; compiling per shape then costs far more than the compiled graph saves.
    return torch.compile(flex_attention, dynamic=True)


# Compiled graphs one compiled FlexAttention may hold. A block mask's sequence lengths are plain integers that the
# compiled graph specializes on, so every new (queries, keys) size compiles anew: continuous batching's token
# buckets and a sweep's lengths make dozens. Past dynamo's default limit (8) the call silently runs uncompiled,
# the unfused math path, which also cannot be captured in a CUDA graph ("Cannot copy between CPU and CUDA tensors
# during CUDA graph capture", seen with torch 2.11 on an H100 at the ninth bucket size).
FLEX_RECOMPILE_LIMIT = 256


def _room_to_recompile(compiled: bool) -> contextlib.AbstractContextManager[object]:
    if not compiled:
        return contextlib.nullcontext()
    return torch._dynamo.config.patch(recompile_limit=max(torch._dynamo.config.recompile_limit, FLEX_RECOMPILE_LIMIT))


@functools.cache
def _compiled_flex_static() -> Callable[..., Any]:
    # Shapes that never change (a decode step's: one query per slot over each slot's cache region) compile once,
    # with sizes known to the kernel's choice (torch's split-KV decoding kernel for short queries).
    return torch.compile(flex_attention, dynamic=False)


@functools.cache
def softcap_score_mod(softcap: float, device: torch.device) -> Callable[..., Any]:
    """FlexAttention's score_mod for Gemma 2's soft-capping: softcap · tanh(score / softcap) of the scaled logit.

    One function object per cap and device, so a compiled flex sees the same score_mod on every call and never
    recompiles for a new closure. The cap is a captured 0-dim tensor, not a Python float: compiled with dynamic
    shapes, dynamo turns a captured float into a symbolic input that inductor's FlexAttention lowering cannot
    take (`LoweringException: unbacked_bindings`, seen with torch 2.11 on an H100 and 2.13 on the CPU), while a
    captured tensor is a graph input it supports.
    """
    cap = torch.tensor(softcap, dtype=torch.float32, device=device)

    def capped(score: Any, batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return cap * torch.tanh(score / cap)

    return capped


def flex_dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: BlockMask, *,
               scale: float | None = None, softcap: float | None = None,
               sinks: torch.Tensor | None = None, static_shapes: bool = False,
               kernel_options: dict[str, Any] | None = None) -> torch.Tensor:
    """FlexAttention, compiled on CUDA (its only fast path); on CPU the unfused reference runs, for tests.

    `softcap` caps the logits through a score_mod, inside the fused kernel; `sinks` (heads,) rescale the output
    by the log-sum-exp flex returns (`sink_rescaled`). `static_shapes` compiles for these exact sizes, for calls
    whose shapes never change. `kernel_options` tune the compiled kernel (FlexAttention's `kernel_options`; None:
    `default_tuning` for this head size and GPU, `{}`: inductor's own choice); the CPU's reference takes none.
    """
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    run = flex_reference if not query.is_cuda else _compiled_flex_static() if static_shapes else _compiled_flex()
    score_mod = softcap_score_mod(softcap, query.device) if softcap else None
    tuning = kernel_options if kernel_options is not None or not query.is_cuda else default_tuning(
        query.shape[-1], _capability(query.device))
    with _room_to_recompile(query.is_cuda):
        output = run(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=is_gqa(query, key),
                     score_mod=score_mod, **_lse_request(sinks is not None),
                     **compiled_kernel_options(query.is_cuda, static_shapes, tuning))
    if sinks is None:
        return first_tensor(output).transpose(1, 2)
    attended, aux = output
    lse = aux if _AUX_REQUEST is None else aux.lse
    return sink_rescaled(attended, lse, sinks).transpose(1, 2)


# FlexAttention's backward for heads of 256 (Gemma 2 and 3) on Hopper GPUs: 32 x 32 tiles, 4 warps, 2 stages,
# where inductor's default for that head size takes larger tiles. The `bwd_` prefix leaves the forward kernel's
# choice to inductor. Measured in whole training steps on an H100 (torch 2.11; docs/benchmarks.md, section 11):
# Gemma 2 2B's uncompiled binned training on flex ran 1.05x and 1.08x eager in two jobs with these tiles (95%
# intervals of the ratio above 1), 1.00x and 1.05x (intervals holding 1) in two without.
WIDE_HEAD_BACKWARD = {"bwd_BLOCK_M1": 32, "bwd_BLOCK_N1": 32, "bwd_BLOCK_M2": 32, "bwd_BLOCK_N2": 32,
                      "bwd_num_warps": 4, "bwd_num_stages": 2}
HOPPER = (9, 0)


@functools.cache
def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def default_tuning(head_dim: int, capability: tuple[int, int]) -> dict[str, Any] | None:
    """The kernel options a call gets when its caller names none: measured ones where they beat inductor's."""
    return dict(WIDE_HEAD_BACKWARD) if head_dim >= 256 and capability == HOPPER else None


def compiled_kernel_options(compiled: bool, static_shapes: bool,
                            tuning: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The `kernel_options` argument of a compiled flex call (none for the CPU's reference).

    Calls with dynamic shapes stay on FlexAttention's main kernel. Otherwise inductor picks its decoding kernel
    for queries shorter than 128 and sizes that kernel's query tile from the first call's length times the
    query heads per key/value head: 65–127 queries with two heads per key/value head ask for a 256-row tile,
    which no 128-token block of the block mask divides, so no configuration is left (`NoValidChoicesError`,
    seen with torch 2.11 on an H100 in the gate of a binned Gemma 2 row). The main kernel takes any length; the
    decoding kernel is for the one-query-per-slot decode steps, which compile with static shapes.
    """
    if not compiled:
        return {}
    options = dict(tuning or {})
    if not static_shapes:
        options["FORCE_USE_FLEX_ATTENTION"] = True
    return {"kernel_options": options} if options else {}


def _lse_request(wanted: bool) -> dict[str, Any]:
    if not wanted:
        return {}
    return {"return_lse": True} if _AUX_REQUEST is None else {"return_aux": _AUX_REQUEST(lse=True)}


def flex_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: BlockMask,
                   **options: Any) -> Any:
    """Uncompiled FlexAttention on (batch, heads, seq, head_dim): torch's unfused reference path.

    `options` go to flex_attention as they are (scale, score_mod, the log-sum-exp request); without a request
    for more, only the output comes back.
    """
    options.setdefault("enable_gqa", query.shape[1] != key.shape[1])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        output = flex_attention(query, key, value, block_mask=block_mask, **options)
    wants_more = options.get("return_lse") or options.get("return_aux") is not None
    return output if wants_more else first_tensor(output)
