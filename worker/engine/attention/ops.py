"""Low-level attention calls with one tensor convention, shared by the model kernels and the attention sweep.

Conventions, for every op here:
- dense tensors are (batch, seq, heads, head_dim): the layout a QKV projection produces and flash-attn takes,
  so a model can hand over transposed views without copying;
- varlen tensors are (total_tokens, heads, head_dim) with int32 `cu_seqlens` (n+1,) on the device and the
  maximum lengths as Python ints, so no op has to read a length back from the device (which would force a
  host sync on every call);
- the output has the query's layout; keys/values may have fewer heads than queries (grouped-query attention).

Library signatures differ between versions (torch's `varlen_attn` changed its causal argument in 2.11,
flash-attn-4 returns a tuple, flash-attn took `softcap` from 2.6); they are detected once per process and
cached, never per call (the flash libraries in `libraries.py`). FlexAttention's calls are in `flex.py`.

Attention sinks (gpt-oss) are one learned logit `s` per query head added to the softmax's denominator and
attending to nothing: softmax over [scores, s] with the sink's column dropped. With Z = Σ exp(scores) = exp(lse)
that is the plain softmax scaled by Z / (Z + exp(s)) = sigmoid(lse − s), so a kernel that returns its
log-sum-exp applies sinks to its output, without a column it cannot add (`sink_rescaled`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from padbench.worker.engine.attention.libraries import (
    FLASH_MODULES,
    KernelUnavailable,
    flash_attn_module,
    optional_module,
)

_VARLEN_CALL: tuple[Callable[..., Any], bool, bool] | None = None


def _torch_varlen_call() -> tuple[Callable[..., Any], bool, bool]:
    """torch's varlen_attn, whether it takes a (left, right) `window_size`, and whether it takes enable_gqa.

    Kept in a module global rather than a `functools.cache`: dynamo traces through a cache wrapper into the
    import and signature checks, which it cannot compile (a graph break, an error inside a checkpointed layer
    that must compile whole), while a global set by the eager gate is a constant to it.
    """
    global _VARLEN_CALL
    if _VARLEN_CALL is None:
        _VARLEN_CALL = _resolve_torch_varlen()
    return _VARLEN_CALL


def _resolve_torch_varlen() -> tuple[Callable[..., Any], bool, bool]:
    module = optional_module("torch.nn.attention.varlen")
    function = getattr(module, "varlen_attn", None)
    if function is None:
        raise KernelUnavailable("torch-flash-varlen", f"torch {torch.__version__} has no varlen_attn (needs 2.10+)")
    parameters = inspect.signature(function).parameters
    # 2.10 spells causality `is_causal`; 2.11+ replaced it with a (left, right) window where (-1, 0) is causal.
    return function, "window_size" in parameters, "enable_gqa" in parameters


def flash_window(window: int | None) -> tuple[int, int]:
    """A sliding window of `window` keys as flash kernels' causal (left, right) `window_size`.

    transformers' window (masking_utils.sliding_window_overlay: `kv_idx > q_idx - sliding_window`, on top of
    the causal `kv_idx <= q_idx`) covers the query itself and the `window - 1` keys before it; flash-attn's
    left size counts the keys before the query only, so it is `window - 1` (transformers' own flash path
    passes the same; torch's varlen_attn docstring writes "(W, 0)" for a window of W keys before the query).
    -1 on the left is unbounded: plain causal attention.
    """
    return (window - 1 if window is not None else -1, 0)


def first_tensor(result: torch.Tensor | tuple[torch.Tensor, ...]) -> torch.Tensor:
    # Some versions return (out, lse); the check is a Python isinstance, no device work.
    return result[0] if isinstance(result, tuple) else result


def is_gqa(query: torch.Tensor, key: torch.Tensor) -> bool:
    return query.shape[-2] != key.shape[-2]


def expand_kv_heads(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values with each head repeated for its query group: GQA for ops that only take equal heads.

    Works on dense (batch, seq, heads, dim) and varlen (tokens, heads, dim) alike: heads are dimension -2.
    """
    groups = query.shape[-2] // key.shape[-2]
    if groups == 1:
        return key, value
    return key.repeat_interleave(groups, dim=-2), value.repeat_interleave(groups, dim=-2)


def torch_varlen_takes_gqa() -> bool:
    return _torch_varlen_call()[2]


def torch_varlen_takes_window() -> bool:
    return _torch_varlen_call()[1]


# --- dense (batch, seq, heads, head_dim) ----------------------------------------------------------------

def sdpa_dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool,
               scale: float | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
    """torch's scaled_dot_product_attention; pin a backend around the call with `sdpa_kernel(...)`.

    `mask` is (batch or 1, 1, q_len, kv_len): boolean, True = attend.
    """
    output = F.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), attn_mask=mask,
        is_causal=causal and mask is None, scale=scale, enable_gqa=is_gqa(query, key))
    return output.transpose(1, 2)


def naive_dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool,
                scale: float | None = None, mask: torch.Tensor | None = None,
                blocked: torch.Tensor | None = None, softcap: float | None = None,
                sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The materialised softmax(QKᵀ)V: the full (batch, heads, q_len, kv_len) score matrix in memory.

    `mask` is boolean (True = attend), broadcastable to the scores. `blocked` is its inverse (True = may not
    attend), for callers that hold it already: it spares a (q_len, kv_len) temporary on every call, which
    matters where the call's peak memory is what is measured. `softcap` bounds the scaled logits to
    ±softcap with tanh before the mask, as Gemma 2 does; `sinks` (heads,) are attention-sink logits.
    """
    if blocked is not None and (mask is not None or causal):
        raise ValueError("naive_dense: `blocked` replaces `mask` and `causal`; fold them into it")
    key, value = expand_kv_heads(query, key, value)
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    scores = torch.matmul(q, k.transpose(-1, -2)).mul_(scale if scale is not None else query.shape[-1] ** -0.5)
    if softcap:
        scores = scores.div_(softcap).tanh_()
        # tanh's backward reads its output, so under autograd the cap multiplies a copy; without, in place.
        scores = scores * softcap if scores.requires_grad else scores.mul_(softcap)
    if causal:
        causal_mask = causal_allowed(query.shape[1], key.shape[1], query.device)
        mask = causal_mask if mask is None else mask & causal_mask
    if mask is not None:
        blocked = mask.logical_not()
    if blocked is not None:
        scores.masked_fill_(blocked, torch.finfo(scores.dtype).min)  # in place: no second matrix
    # Softmax in the scores' dtype (torch accumulates in fp32 internally), as a plain implementation does;
    # an fp32 copy of the (batch, heads, q, kv) matrix would double the memory of this baseline.
    weights = torch.softmax(scores, dim=-1)
    output = torch.matmul(weights, v)
    if sinks is not None:
        output = sink_rescaled(output, torch.logsumexp(scores, dim=-1), sinks)
    return output.transpose(1, 2)


def sink_rescaled(output: torch.Tensor, lse: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    """Attention without sinks → with them: `output` (batch, heads, q, d) scaled by sigmoid(lse − sink).

    `lse` (batch, heads, q) is the log-sum-exp of each query's (capped, masked) logits and `sinks` (heads,)
    the sink logits (see the module's docstring). A query with no key (lse = −inf) stays at zero.
    """
    factor = torch.sigmoid(lse.float() - sinks.float()[:, None]).unsqueeze(-1)
    return (output * factor).to(output.dtype)


def _feature_kwargs(softcap: float | None, sinks: torch.Tensor | None) -> dict[str, Any]:
    """flash-attn's `softcap` and flash-attn-4's `learnable_sink`, passed only when used (older versions lack
    them; `flash_library_reason` refuses a model that needs one there)."""
    kwargs: dict[str, Any] = {} if not softcap else {"softcap": softcap}
    if sinks is not None:
        if sinks.requires_grad and torch.is_grad_enabled():
            # flash-attn-4's backward returns no gradient for learnable_sink: training would freeze the sinks.
            raise KernelUnavailable("flash-attn-cute", "flash-attn-4 computes no gradient for attention sinks, "
                                                       "so it cannot train a model that has them")
        kwargs["learnable_sink"] = sinks.to(torch.bfloat16)  # the only dtype flash-attn-4 takes for sinks
    return kwargs


def _cute_feature_kwargs(query: torch.Tensor, softcap: float | None,
                         sinks: torch.Tensor | None) -> dict[str, Any]:
    if softcap and query.requires_grad and torch.is_grad_enabled():
        # flash-attn-4's backward asserts softcap == 0: refused here, with the reason, rather than by its assert.
        raise KernelUnavailable("flash-attn-cute", "flash-attn-4's backward takes no soft-capping, so it cannot "
                                                   "train a model that caps its attention logits (use flex or eager)")
    return _feature_kwargs(softcap, sinks)


def _window_kwargs(window: int | None) -> dict[str, Any]:
    # Only when there is a window: flash-attn's default (-1, -1) and flash-attn-4's (None, None) differ.
    return {} if window is None else {"window_size": flash_window(window)}


def flash_attn_dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool,
                     scale: float | None = None, window: int | None = None, softcap: float | None = None,
                     sinks: torch.Tensor | None = None) -> torch.Tensor:
    return first_tensor(flash_attn_module().flash_attn_func(query, key, value, softmax_scale=scale, causal=causal,
                                                      **_window_kwargs(window), **_feature_kwargs(softcap, sinks)))


# --- varlen (total_tokens, heads, head_dim) --------------------------------------------------------------

def torch_varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens_q: torch.Tensor,
                 cu_seqlens_k: torch.Tensor, max_q: int, max_k: int, *, causal: bool,
                 scale: float | None = None, window: int | None = None) -> torch.Tensor:
    function, takes_window, takes_gqa = _torch_varlen_call()
    if window is not None and not (causal and takes_window):
        raise KernelUnavailable("torch-flash-varlen", f"torch {torch.__version__}'s varlen_attn takes no sliding window"
                                if not takes_window else "a sliding window applies to causal attention only")
    kwargs: dict[str, Any] = {}
    if causal:
        kwargs = {"window_size": flash_window(window)} if takes_window else {"is_causal": True}
    if is_gqa(query, key):
        if takes_gqa:
            kwargs["enable_gqa"] = True
        else:  # this torch's varlen_attn takes equal heads only
            key, value = expand_kv_heads(query, key, value)
    return first_tensor(function(query, key, value, cu_seqlens_q, cu_seqlens_k, max_q, max_k, scale=scale, **kwargs))


def flash_attn_varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens_q: torch.Tensor,
                      cu_seqlens_k: torch.Tensor, max_q: int, max_k: int, *, causal: bool,
                      scale: float | None = None, window: int | None = None, softcap: float | None = None,
                      sinks: torch.Tensor | None = None) -> torch.Tensor:
    return first_tensor(flash_attn_module().flash_attn_varlen_func(
        query, key, value, cu_seqlens_q, cu_seqlens_k, max_q, max_k, softmax_scale=scale, causal=causal,
        **_window_kwargs(window), **_feature_kwargs(softcap, sinks)))


# The flash libraries padbench calls by keyword, FlashAttention-4 (flash_attn.cute) and FlashAttention-3
# (flash_attn_interface): the same calls, each library's module looked up at the call (`FLASH_MODULES`).
FeatureKwargs = Callable[[torch.Tensor, "float | None", "torch.Tensor | None"], dict[str, Any]]


def _plain_features(query: torch.Tensor, softcap: float | None, sinks: torch.Tensor | None) -> dict[str, Any]:
    return _feature_kwargs(softcap, sinks)


def _keyword_flash_dense(family: str, features: FeatureKwargs) -> Callable[..., torch.Tensor]:
    def dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool,
              scale: float | None = None, window: int | None = None, softcap: float | None = None,
              sinks: torch.Tensor | None = None) -> torch.Tensor:
        return first_tensor(FLASH_MODULES[family]().flash_attn_func(
            query, key, value, softmax_scale=scale, causal=causal, **_window_kwargs(window),
            **features(query, softcap, sinks)))

    return dense


def _keyword_flash_varlen(family: str, features: FeatureKwargs) -> Callable[..., torch.Tensor]:
    def varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, max_q: int, max_k: int, *, causal: bool, scale: float | None = None,
               window: int | None = None, softcap: float | None = None,
               sinks: torch.Tensor | None = None) -> torch.Tensor:
        return first_tensor(FLASH_MODULES[family]().flash_attn_varlen_func(
            query, key, value, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_q,
            max_seqlen_k=max_k, softmax_scale=scale, causal=causal, **_window_kwargs(window),
            **features(query, softcap, sinks)))

    return varlen


flash_attn_cute_dense = _keyword_flash_dense("flash-attn-cute", _cute_feature_kwargs)
flash_attn_cute_varlen = _keyword_flash_varlen("flash-attn-cute", _cute_feature_kwargs)
flash_attn_3_dense = _keyword_flash_dense("flash-attn-3", _plain_features)
flash_attn_3_varlen = _keyword_flash_varlen("flash-attn-3", _plain_features)


# --- materialised masks ------------------------------------------------------------------------------------

def causal_allowed(q_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """(q_len, kv_len) bool, aligned bottom-right as flash kernels do when q_len < kv_len."""
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).tril_(kv_len - q_len)
