"""The sweep's kernel plugin family: one entry per attention implementation, in a typed registry.

Each kernel binds a problem's canonical (batch, seq, heads, head_dim) tensors into a zero-argument call
that returns the output in the same layout; everything a kernel must build once (masks, block masks,
flattened views, cumulative lengths) is built at bind time, outside the timed region. SDPA backends are
pinned with `sdpa_kernel(...)`, which raises instead of silently falling back, so a cell always measures
the kernel its column names. The varlen and flash-attn calls come from `padbench.worker.engine.attention.ops`,
which detects library signatures once per process.

Availability is detected, never assumed: a tiny call on the device in the dtype, cached per process.
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

from padbench.contract.registry import Registry
from padbench.kinds.attention.contract import SweepKernelName
from padbench.worker.engine.attention import ops
from padbench.worker.jobs.attention import fp8
from padbench.worker.jobs.attention.inputs import InputSet, Problem, make_input_sets

KernelCall = Callable[[], torch.Tensor]
Binder = Callable[[Problem, InputSet], KernelCall]
AvailabilityCheck = Callable[[torch.device, torch.dtype], "str | None"]

HALF_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class SweepKernel:
    name: SweepKernelName
    bind_dense: Binder
    bind_varlen: Binder | None  # None: the kernel cannot express document masking
    check: AvailabilityCheck  # static prerequisites (device, dtype, package); a tiny probe call follows
    # How many (batch, heads, N, N) matrices the kernel holds at its peak (forward, forward+backward);
    # zero for tiled kernels. Used to skip cells that cannot fit rather than wait for them to fail.
    score_matrices: tuple[int, int] = (0, 0)
    varlen_reason: str = ""
    problem_check: Callable[[Problem], str | None] | None = None  # which problems it refuses, where not only varlen

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        """None when the kernel runs on this device in this dtype, else the reason it does not."""
        return _availability(self.name, str(device), dtype)

    def unsupported(self, problem: Problem) -> str | None:
        if self.problem_check is not None:
            return self.problem_check(problem)
        if problem.layout == "varlen" and self.bind_varlen is None:
            return self.varlen_reason
        return None

    def predicted_bytes(self, problem: Problem) -> int:
        """The materialised score matrices' size (0 for tiled kernels): a lower bound on the peak."""
        return self.score_matrices[int(problem.backward)] * problem.score_matrix_bytes

    def bind(self, problem: Problem, inputs: InputSet) -> KernelCall:
        binder = self.bind_varlen if problem.layout == "varlen" else self.bind_dense
        if binder is None:
            raise ValueError(f"{self.name}: {self.unsupported(problem)}")
        return binder(problem, inputs)


SWEEP_KERNELS: Registry[SweepKernel] = Registry("sweep kernel")


def available_sweep_kernels(device: torch.device | str) -> list[str]:
    """The kernels that run on `device` in bf16 or fp32: what a worker registers as capabilities."""
    device = torch.device(device)
    return [name for name, kernel in SWEEP_KERNELS.items()
            if any(kernel.available(device, dtype) is None for dtype in (torch.bfloat16, torch.float32))]


@functools.cache
def _availability(name: str, device_name: str, dtype: torch.dtype) -> str | None:
    kernel, device = SWEEP_KERNELS.get(name), torch.device(device_name)
    reason = kernel.check(device, dtype)
    if reason is not None or name == "flex":  # flex's probe would be a full compile: prerequisites only
        return reason
    probe = Problem(batch=1, heads=2, kv_heads=2, head_dim=64, seq_len=128, causal=True, dtype=dtype,
                    backward=False, layout="dense")
    try:
        kernel.bind(probe, make_input_sets(probe, device, count=1)[0])()
    except Exception as error:  # any failure of a 128-token call means the kernel cannot run here
        return describe_error(error)
    return None


def describe_error(error: BaseException, limit: int = 200) -> str:
    """`Type: message` of an exception on one line, short enough for a cell's reason."""
    text = " ".join(str(error).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# --- availability prerequisites ----------------------------------------------------------------------------

def _anywhere(device: torch.device, dtype: torch.dtype) -> str | None:
    return None


def _cuda_half(package: Callable[[], object]) -> AvailabilityCheck:
    def check(device: torch.device, dtype: torch.dtype) -> str | None:
        if device.type != "cuda":
            return "needs a CUDA device"
        if dtype not in HALF_DTYPES:
            return "needs dtype fp16 or bf16"
        try:
            package()
        except ops.KernelUnavailable as error:
            return error.reason
        return None

    return check


def _hopper_or_later(check: AvailabilityCheck) -> AvailabilityCheck:
    """`check`, and a GPU with float8 tensor cores (compute capability 9.0, Hopper, or later)."""
    def check_hopper(device: torch.device, dtype: torch.dtype) -> str | None:
        reason = check(device, dtype)
        if reason is None and torch.cuda.get_device_capability(device) < (9, 0):
            return "needs a Hopper GPU or later (compute capability 9.0) for float8 tensor cores"
        return reason

    return check_hopper


def _flex_prerequisites(device: torch.device, dtype: torch.dtype) -> str | None:
    # Compiled FlexAttention generates Triton kernels on CUDA and C++ on the CPU.
    if device.type == "cuda":
        return None if ops.optional_module("triton") is not None else "needs triton to compile on CUDA"
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


# --- the registry -------------------------------------------------------------------------------------------

def _register(kernel: SweepKernel) -> None:
    SWEEP_KERNELS.add(kernel.name, kernel)


_NO_MASK = "the flash backend of SDPA takes no attention mask; use `varlen` for documents"
_register(SweepKernel("naive", _bind_naive, _bind_naive, _anywhere, score_matrices=(2, 4)))
_register(SweepKernel("sdpa-math", _sdpa_binder(SDPBackend.MATH), _sdpa_binder(SDPBackend.MATH), _anywhere,
                      score_matrices=(2, 4)))
_register(SweepKernel("sdpa-efficient", _sdpa_binder(SDPBackend.EFFICIENT_ATTENTION),
                      _sdpa_binder(SDPBackend.EFFICIENT_ATTENTION), _anywhere))
_register(SweepKernel("sdpa-flash", _sdpa_binder(SDPBackend.FLASH_ATTENTION), None, _anywhere,
                      varlen_reason=_NO_MASK))
_register(SweepKernel("varlen", _varlen_binder(ops.torch_varlen), _varlen_binder(ops.torch_varlen), _anywhere))
_register(SweepKernel("flex", _bind_flex, _bind_flex, _flex_prerequisites))
_register(SweepKernel("flash-attn", _flash_dense_binder(ops.flash_attn_dense), _varlen_binder(ops.flash_attn_varlen),
                      _cuda_half(ops.flash_attn_module)))
_register(SweepKernel("flash-attn-fp8", fp8.bind_fp8, None, _hopper_or_later(_cuda_half(fp8.fa3_module)),
                      problem_check=fp8.fp8_unsupported))
_register(SweepKernel("flash-attn-cute", _flash_dense_binder(ops.flash_attn_cute_dense),
                      _varlen_binder(ops.flash_attn_cute_varlen), _cuda_half(ops.flash_attn_cute_module)))
