"""How each sweep kernel computes: its binding, which the kernel's declaration in its family's module names
(`padbench/kernels/<family>.py`, e.g. `padbench.worker.jobs.attention.bindings.NAIVE`).

A binding binds a problem's canonical (batch, seq, heads, head_dim) tensors into a zero-argument call that returns
the output in the same layout; everything a kernel must build once (masks, block masks, flattened views, cumulative
lengths) is built at bind time, outside the timed region. SDPA backends are pinned with `sdpa_kernel(...)`, which
raises instead of silently falling back, so a cell always measures the kernel its column names. The varlen and
flash-attn calls come from `padbench.worker.engine.attention.ops`, which detects library signatures once per
process. What a kernel needs beyond its declared facts (device, dtype, GPU generation) — a package, a compiler —
is its binding's `prerequisites`.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from padbench.worker.engine.attention import libraries, ops
from padbench.worker.jobs.attention import fp8
from padbench.worker.jobs.attention.inputs import InputSet, Problem

KernelCall = Callable[[], torch.Tensor]
Binder = Callable[[Problem, InputSet], KernelCall]
AvailabilityCheck = Callable[[torch.device, torch.dtype], "str | None"]


# --- availability prerequisites ----------------------------------------------------------------------------

def _anywhere(device: torch.device, dtype: torch.dtype) -> str | None:
    return None


def _package(load: Callable[[], object]) -> AvailabilityCheck:
    """A check that the library `load` imports is there (its KernelUnavailable's reason where it is not)."""
    def check(device: torch.device, dtype: torch.dtype) -> str | None:
        try:
            load()
        except libraries.KernelUnavailable as error:
            return error.reason
        return None

    return check


def _flex_prerequisites(device: torch.device, dtype: torch.dtype) -> str | None:
    # Compiled FlexAttention generates Triton kernels on CUDA and C++ on the CPU.
    if device.type == "cuda":
        return None if libraries.optional_module("triton") is not None else "needs triton to compile on CUDA"
    compiler = os.environ.get("CXX", "g++")
    return None if shutil.which(compiler) or shutil.which("c++") else f"needs a C++ compiler ({compiler}) on CPU"


# --- naive --------------------------------------------------------------------------------------------------

def _blocked_positions(problem: Problem, inputs: InputSet) -> torch.Tensor | None:
    """The (query, key) pairs that may not attend, built once at bind time: the mask counts as the
    kernel's memory, as in a plain implementation, but building it is not timed."""
    if inputs.documents is not None:
        return inputs.documents.cache_get("blocked", lambda s: ~s.allowed(problem.causal))
    if problem.causal:
        return ops.causal_allowed(problem.seq_len, problem.seq_len, inputs.query.device).logical_not_()
    return None


def _bind_naive(problem: Problem, inputs: InputSet) -> KernelCall:
    """softmax(QKᵀ/√d)V with the full score matrix in memory, as a plain PyTorch model writes it."""
    blocked = _blocked_positions(problem, inputs)
    return lambda: ops.naive_dense(inputs.query, inputs.key, inputs.value, causal=False, blocked=blocked)


# --- SDPA, pinned to one backend ------------------------------------------------------------------------

def _sdpa_binder(backend: SDPBackend) -> Binder:
    def bind(problem: Problem, inputs: InputSet) -> KernelCall:
        mask = None
        if inputs.documents is not None:
            mask = inputs.documents.cache_get("allowed", lambda s: s.allowed(problem.causal))

        def call() -> torch.Tensor:
            with sdpa_kernel(backend):
                return ops.sdpa_dense(inputs.query, inputs.key, inputs.value, causal=problem.causal, mask=mask)

        return call

    return bind


# --- varlen kernels (torch varlen_attn, flash-attn, flash-attn-4) -------------------------------------------

def _varlen_binder(function: Callable[..., torch.Tensor]) -> Binder:
    """Flatten (batch, seq) into tokens; a dense problem is one document per row."""

    def bind(problem: Problem, inputs: InputSet) -> KernelCall:
        tokens = problem.batch * problem.seq_len
        q, k, v = (t.view(tokens, t.shape[2], t.shape[3]) for t in (inputs.query, inputs.key, inputs.value))
        if inputs.documents is not None:
            cu_seqlens, longest = inputs.documents.cu_seqlens, inputs.documents.max_document
        else:
            cu_seqlens = torch.arange(0, tokens + 1, problem.seq_len, dtype=torch.int32, device=q.device)
            longest = problem.seq_len
        shape = inputs.query.shape

        def call() -> torch.Tensor:
            out = function(q, k, v, cu_seqlens, cu_seqlens, longest, longest, causal=problem.causal)
            return out.view(shape)

        return call

    return bind


def _flash_dense_binder(function: Callable[..., torch.Tensor]) -> Binder:
    def bind(problem: Problem, inputs: InputSet) -> KernelCall:
        return lambda: function(inputs.query, inputs.key, inputs.value, causal=problem.causal)

    return bind


# --- FlexAttention, compiled ---------------------------------------------------------------------------------

@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    # Default (automatic) dynamism: the first length compiles static, a second marks the length dynamic
    # and later lengths reuse that graph. Forcing dynamic=True from the start generates C++ that does not
    # compile on the CPU for lengths off the 128-token block size (torch 2.13). Compile time lands in each
    # cell's warm-up figure, never in its timed calls.
    return torch.compile(flex_attention)


def _flex_block_mask(problem: Problem, inputs: InputSet) -> BlockMask | None:
    device = inputs.query.device
    if inputs.documents is not None:
        ids = inputs.documents.document_ids

        def same_document(batch, head, q_index, kv_index):  # type: ignore[no-untyped-def]
            allowed = ids[batch, q_index] == ids[batch, kv_index]
            return allowed & (q_index >= kv_index) if problem.causal else allowed

        return inputs.documents.cache_get("flex", lambda s: create_block_mask(
            same_document, problem.batch, None, problem.seq_len, problem.seq_len, device=device))
    if not problem.causal:
        return None  # full attention: no mask, no skipped tiles

    def causal(batch, head, q_index, kv_index):  # type: ignore[no-untyped-def]
        return q_index >= kv_index

    return create_block_mask(causal, None, None, problem.seq_len, problem.seq_len, device=device)


def _bind_flex(problem: Problem, inputs: InputSet) -> KernelCall:
    block_mask = _flex_block_mask(problem, inputs)
    gqa = problem.kv_heads != problem.heads
    q, k, v = (t.transpose(1, 2) for t in (inputs.query, inputs.key, inputs.value))
    flex = _compiled_flex()
    return lambda: flex(q, k, v, block_mask=block_mask, enable_gqa=gqa).transpose(1, 2)


# --- the bindings, as the declarations name them --------------------------------------------------------------

@dataclass(frozen=True)
class SweepBinding:
    bind_dense: Binder
    bind_varlen: Binder | None = None  # None: it cannot express document masking (its declaration says why)
    prerequisites: AvailabilityCheck = _anywhere  # a package, a compiler: what it needs beyond its declared facts
    # Whether availability runs a tiny call after the prerequisites; flex's would be a full compile.
    probed: bool = True


NAIVE = SweepBinding(_bind_naive, _bind_naive)
SDPA_MATH = SweepBinding(_sdpa_binder(SDPBackend.MATH), _sdpa_binder(SDPBackend.MATH))
SDPA_EFFICIENT = SweepBinding(_sdpa_binder(SDPBackend.EFFICIENT_ATTENTION),
                              _sdpa_binder(SDPBackend.EFFICIENT_ATTENTION))
SDPA_FLASH = SweepBinding(_sdpa_binder(SDPBackend.FLASH_ATTENTION))
VARLEN = SweepBinding(_varlen_binder(ops.torch_varlen), _varlen_binder(ops.torch_varlen))
FLEX = SweepBinding(_bind_flex, _bind_flex, _flex_prerequisites, probed=False)
FLASH_ATTN = SweepBinding(_flash_dense_binder(ops.flash_attn_dense), _varlen_binder(ops.flash_attn_varlen),
                          _package(libraries.flash_attn_module))
FLASH_ATTN_CUTE = SweepBinding(_flash_dense_binder(ops.flash_attn_cute_dense),
                               _varlen_binder(ops.flash_attn_cute_varlen), _package(libraries.flash_attn_cute_module))
FLASH_ATTN_3 = SweepBinding(_flash_dense_binder(ops.flash_attn_3_dense), _varlen_binder(ops.flash_attn_3_varlen),
                            _package(libraries.flash_attn_3_module))
FLASH_ATTN_FP8 = SweepBinding(fp8.bind_fp8, prerequisites=_package(fp8.fa3_module))
