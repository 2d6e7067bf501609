"""Attention over the KV cache for batched decoding, registered in transformers' attention interface.

Each model layer hands its queries, keys and values of the step's tokens to the function registered under
the kernel's name (with the step's `StepInputs` as the `padbench_step` keyword argument). The function writes
the new keys and values into the layer's cache rows, then attends each slot's queries to its range:

- `torch-flash-kvcache`: torch's FlashAttention-2 varlen forward reading every slot's range in place
  (`seqused_k`), grouped-query heads natively, sliding windows as the kernel's left window; no copy, no
  mask, and its shapes stay fixed from step to step, so a decode step replays as one CUDA graph;
- `sdpa-kvcache`: scaled_dot_product_attention; a pure decode step is one batched call over every slot's
  whole region with a boolean mask (fixed shapes, so it also replays as a graph, at the price of reading
  each region in full), any other step one call per slot;
- `eager-kvcache`: the score, softmax and value matmuls written out per slot, with logit soft-capping
  (Gemma 2) and attention sinks (gpt-oss): the plain computation the others are checked against;
- `flex-kvcache` (`flex_decode.py`): FlexAttention with block masks over the cache, soft-capping and sinks
  included.

Each class is how a kernel computes; its name, family and what it applies are declared in its family's module
(`padbench/kernels/<family>.py`), which names the class, and bound to it when the worker loads the family
(`registry.py` holds them by name).

Queries with no key to attend to (the pads in front of a left-padded prompt) produce zeros, never NaN: their
keys and values land in cache rows nobody attends to, but a NaN there would still poison a masked matmul.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from padbench.worker.engine.attention.base import HALF_PRECISION
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.decoding.cache import StepInputs

HF_NAME_PREFIX = "padbench-decode-"


class DecodeKernel(ABC):
    # The name, the family and the facts up to `applies_window` are the kernel's declaration's, bound to the class
    # when the worker loads its family (`padbench.worker.engine.families`).
    name: ClassVar[str]  # what results record
    family: ClassVar[str]  # the spec's attention name it implements
    applies_softcap: ClassVar[bool] = False
    applies_sinks: ClassVar[bool] = False  # gpt-oss's learned per-head logit in every softmax's denominator
    applies_window: ClassVar[bool] = False
    half_precision_only: ClassVar[bool] = False
    # Whether a pure decode step's attention keeps fixed shapes and reads no host integers (CUDA graphs).
    graph_safe: ClassVar[bool] = True
    # Whether steps with prefills attend slot by slot from host integers (then they cannot run compiled).
    loops_over_slots: ClassVar[bool] = False

    def __init__(self) -> None:
        # The bare function serves eager steps and the compiled decode step, whose static shapes let inductor
        # trace the attention: it reinplaces the cache writes into the kernels that produce the keys and values
        # (no copy of the cache), and the step stays one graph rather than one per layer. On an H100, Qwen3-1.7B's
        # decode step of 64 sequences on flex-kvcache took 3.12 ms traced against 3.37 ms fenced.
        AttentionInterface.register(self.hf_name, self._transformers_attention)
        # Steps with prefills compile with dynamic shapes, and their attention sizes its masks from the step's
        # token count on the host (a guard, so a recompile at each new count): it stays out of their graphs.
        # The fence is not free out of torch.compile (dynamo's frame hooks cost milliseconds per call), so it
        # has a name of its own.
        AttentionInterface.register(self.hf_name_fenced, torch.compiler.disable(self._transformers_attention))

    @property
    def hf_name(self) -> str:
        return HF_NAME_PREFIX + self.name

    @property
    def hf_name_fenced(self) -> str:
        return self.hf_name + "-fenced"

    def unavailable_reason(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if self.half_precision_only and dtype not in HALF_PRECISION:
            return f"it needs bf16 or fp16, not {str(dtype).removeprefix('torch.')}"
        return None

    def unsupported_reason(self, softcap: float | None, sinks: bool = False, window: int | None = None) -> str | None:
        if window is not None and not self.applies_window:
            return f"{self.name} does not apply a sliding window (the model attends within {window} tokens)"
        if softcap is not None and not self.applies_softcap:
            return (f"{self.name} does not apply attention logit soft-capping (the model caps at {softcap:g}); "
                    "eager-kvcache does")
        if sinks and not self.applies_sinks:
            return (f"{self.name} does not apply attention sinks (the model adds a learned logit per head to every "
                    "softmax's denominator); eager-kvcache does")
        return None

    def _transformers_attention(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                value: torch.Tensor, attention_mask: torch.Tensor | None,
                                scaling: float | None = None, dropout: float = 0.0, softcap: float | None = None,
                                sliding_window: int | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
        step: StepInputs = kwargs["padbench_step"]
        sinks = kwargs.get("s_aux")
        reason = self.unsupported_reason(softcap or None, sinks is not None, sliding_window or None)
        if reason is not None:
            raise KernelUnavailable(self.name, reason)
        layer = int(module.layer_idx)  # type: ignore[arg-type]
        # (1, heads, T, head_dim) in; (T, heads, head_dim) is the varlen layout of the cache.
        q, k, v = (tensor[0].transpose(0, 1) for tensor in (query, key, value))
        keys, values = step.cache.keys[layer], step.cache.values[layer]
        keys.index_copy_(0, step.write_index, k)
        values.index_copy_(0, step.write_index, v)
        scale = scaling if scaling is not None else q.shape[-1] ** -0.5
        out = self.attend(q, keys, values, step, scale, softcap or None, sliding_window or None, sinks)
        return out.unsqueeze(0), None

    @abstractmethod
    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs, scale: float,
               softcap: float | None, window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        """(T, heads, head_dim) queries in, the same out; `keys`/`values` are the layer's whole cache; `sinks`
        (heads,) only reach kernels that apply them."""


class TorchFlashDecode(DecodeKernel):
    """torch's FlashAttention-2 varlen forward, reading every slot's range of the cache in place."""

    def unavailable_reason(self, device: torch.device, dtype: torch.dtype) -> str | None:
        reason = super().unavailable_reason(device, dtype)
        if reason is not None:
            return reason
        if device.type != "cuda":
            return "torch's flash kernels run on CUDA GPUs only"
        return _flash_probe(str(device), dtype)

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs, scale: float,
               softcap: float | None, window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        kv_heads = keys.shape[1]
        groups = q.shape[1] // kv_heads
        if step.is_decode_of_every_slot(q.shape[0]) and groups > 1 and window is None:
            return self._attend_grouped_decode(q, keys, values, step, scale, groups)
        windowed = {"window_size_left": window - 1, "window_size_right": 0} if window else {}
        out = torch.ops.aten._flash_attention_forward(
            q, keys, values, step.cu_q, step.k_start, step.max_q, step.cache.longest_range, 0.0, True, False,
            scale=scale, seqused_k=step.k_used, **windowed)
        return out[0]

    def _attend_grouped_decode(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs,
                               scale: float, groups: int) -> torch.Tensor:
        """A decode step with grouped-query heads: each slot's query heads of one key/value head become that
        head's `groups` query rows, so each key/value head is read once per slot rather than once per query
        head. Every row is the same position, the last, which sees the whole range: no causal mask."""
        slots, kv_heads, head_dim = q.shape[0], keys.shape[1], q.shape[2]
        rows = q.view(slots, kv_heads, groups, head_dim).transpose(1, 2).reshape(slots * groups, kv_heads, head_dim)
        cu_rows = step.extras.get("grouped_cu_q")
        if cu_rows is None:
            cu_rows = step.extras["grouped_cu_q"] = step.cu_q * groups
        out = torch.ops.aten._flash_attention_forward(
            rows, keys, values, cu_rows, step.k_start, groups, step.cache.capacity, 0.0, False, False, scale=scale,
            seqused_k=step.k_used)[0]
        return out.view(slots, groups, kv_heads, head_dim).transpose(1, 2).reshape(slots, kv_heads * groups, head_dim)


@functools.cache
def _flash_probe(device: str, dtype: torch.dtype) -> str | None:
    """None when torch's flash forward takes a cache read in place (`seqused_k`) here, else why not."""
    schema = str(torch.ops.aten._flash_attention_forward.default._schema)
    if "seqused_k" not in schema:
        return f"torch {torch.__version__}'s flash forward takes no seqused_k (a cache read in place)"
    try:
        q = torch.zeros(2, 2, 64, device=device, dtype=dtype)
        cache = torch.zeros(16, 1, 64, device=device, dtype=dtype)
        counts = torch.tensor([0, 1, 2], device=device, dtype=torch.int32)
        starts = torch.tensor([0, 8, 16], device=device, dtype=torch.int32)
        used = torch.tensor([3, 5], device=device, dtype=torch.int32)
        torch.ops.aten._flash_attention_forward(q, cache, cache, counts, starts, 1, 8, 0.0, True, False,
                                                seqused_k=used)
        torch.cuda.synchronize(device)
    except Exception as error:  # the library's own refusal: an old GPU, a build without flash
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    return None


class SlotLoopKernel(DecodeKernel):
    """One attention call per slot, over the slot's range as host integers give it."""

    loops_over_slots = True

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs, scale: float,
               softcap: float | None, window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        if step.host is None:
            return self.attend_decode_batched(q, keys, values, step, scale, window)
        plan = step.host
        out = torch.zeros_like(q)
        start = 0
        for count, k_start, k_used in zip(plan.query_counts.tolist(), plan.k_start.tolist(), plan.k_used.tolist(),
                                          strict=True):
            if count:
                seen = min(count, k_used)  # the queries before these have no key (pads): zeros
                rows = slice(start + count - seen, start + count)
                out[rows] = self.attend_one(q[rows], keys[k_start:k_start + k_used], values[k_start:k_start + k_used],
                                            scale, softcap, window, sinks)
            start += count
        return out

    def attend_decode_batched(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs,
                              scale: float, window: int | None) -> torch.Tensor:
        raise KernelUnavailable(self.name, "a step without host ranges (a CUDA graph) needs a batched path")

    @abstractmethod
    def attend_one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                   window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        """(n, heads, d) queries, the last n of a sequence whose keys are (L, kv_heads, d), bottom-right causal."""


def causal_window_mask(queries: int, keys: int, window: int | None, device: torch.device) -> torch.Tensor:
    """(queries, keys), True where query i (the last `queries` of `keys` positions) may attend to key j."""
    query_position = torch.arange(keys - queries, keys, device=device)[:, None]
    key_position = torch.arange(keys, device=device)[None, :]
    allowed = key_position <= query_position
    if window is not None:
        allowed &= key_position > query_position - window
    return allowed


class SdpaDecode(SlotLoopKernel):
    """scaled_dot_product_attention: one masked call over every slot's region in a pure decode step."""

    def attend_one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                   window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        mask = causal_window_mask(q.shape[0], k.shape[0], window, q.device)
        out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                             attn_mask=mask, scale=scale, enable_gqa=True)
        return out.transpose(0, 1)

    def attend_decode_batched(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs,
                              scale: float, window: int | None) -> torch.Tensor:
        # One mask per window a step's layers use: Gemma 3's and gpt-oss's layers alternate windows.
        key = f"decode_mask:{window}"
        mask = step.extras.get(key)
        if mask is None:
            mask = step.extras[key] = decode_mask(step, window)
        regions = step.cache.regions  # (slots, capacity, kv_heads, d); sdpa takes the heads first
        out = F.scaled_dot_product_attention(q.unsqueeze(2), regions(keys).transpose(1, 2),
                                             regions(values).transpose(1, 2), attn_mask=mask, scale=scale,
                                             enable_gqa=True)
        return out.squeeze(2)


def decode_mask(step: StepInputs, window: int | None) -> torch.Tensor:
    """(slots, 1, 1, capacity): each slot's one query sees its attended range of its own region."""
    first, last = step.slot_ranges(window)
    column = torch.arange(step.cache.capacity, device=first.device, dtype=torch.int32)[None, :]
    visible = (column >= first[:, None]) & (column <= last[:, None])
    return visible[:, None, None, :]


class EagerDecode(SlotLoopKernel):
    """The scores, softmax and values written out per slot: the plain computation."""

    graph_safe = False

    def attend_one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                   window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        scores = scores.masked_fill(~causal_window_mask(q.shape[0], k.shape[0], window, q.device), -math.inf)
        weights = torch.softmax(scores, dim=-1)
        if sinks is not None:  # softmax over [scores, sink] without the sink's column (ops.sink_rescaled)
            weights = weights * torch.sigmoid(torch.logsumexp(scores, dim=-1) - sinks.float()[:, None])[..., None]
        return torch.einsum("hqk,khd->qhd", weights, v.float()).to(q.dtype)
