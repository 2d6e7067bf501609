"""The attention-kernel plugin interface and its bridge into transformers' causal language models.

The attention layer of every model family padbench runs (Llama, Qwen 2, Mistral, Gemma 2, Phi-3, GPT-2, …)
looks its attention function up by `config._attn_implementation` in transformers' `AttentionInterface` and
forwards every extra keyword argument of the model call to it. Each kernel registers one function there
under its own name and passes what it precomputed per batch (cu_seqlens, integer max lengths, masks) as
`padbench_*` keyword arguments, so nothing is derived from the device inside the layers: reading a length
back from the device (a `cu_seqlens.diff().max()` per layer, say) forces a host sync on every forward, and
transformers' own flash path would otherwise derive cu_seqlens and max lengths from the position ids on
the device. Because those names are unknown to transformers' mask registry, `create_causal_mask` returns
at once: no O(L²) packed-sequence mask and no position-id scan (which reads the device) on any forward.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any, ClassVar

import torch
from transformers import AttentionInterface

from padbench.worker.engine.attention.features import (
    AttentionFeatures,
    GqaHandling,
    missing_feature_reason,
    window_bites,
    window_reason,
)
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.data.batches import Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.model.build import config_of
from padbench.worker.engine.training.checkpointing import replayed_in_recompute
from padbench.worker.runtime.messages import first_line

HALF_PRECISION = (torch.float16, torch.bfloat16)
HF_NAME_PREFIX = "padbench-"
KERNEL_INPUT_PREFIX = "padbench_"

# (kernel name, device, dtype) → None when it runs, else why not. Probed once per process.
_AVAILABILITY: dict[tuple[str, str, torch.dtype], str | None] = {}


class AttentionKernel(ABC):
    """One way of computing a causal language model's self-attention for one batch layout."""

    # The name and family, and the facts below them up to `applies_window`, are the kernel's declaration's
    # (`padbench/kernels/<family>.py`), bound to the implementation when the worker loads the family
    # (`padbench.worker.engine.families`); a subclass for a test sets its own.
    name: ClassVar[str]  # what actually runs, recorded with the result (e.g. `torch-flash-varlen`)
    family: ClassVar[str]  # the spec's attention name it implements: torch-flash, flash-attn, sdpa, flex, …
    layout: ClassVar[type[PaddedBatch] | type[PackedBatch]]
    half_precision_only: ClassVar[bool] = False
    # Logit soft-capping (Gemma 2) and attention sinks (gpt-oss): only kernels that apply them may run a model
    # that uses them (where the installed library takes them: `library_reason`).
    applies_softcap: ClassVar[bool] = False
    applies_sinks: ClassVar[bool] = False
    # Sliding windows (Mistral; Gemma 2/3 and gpt-oss on their local layers): only kernels that band each
    # layer's attention by the window it is called with may run a model whose window sequences outgrow.
    applies_window: ClassVar[bool] = False
    # How the implementation computes, its own to say. Kernels that JIT-compile per new input shape
    # (flash-attn-4's CuTe DSL): the warm-up must show them every batch once, or compilation lands inside the
    # timed region (seen on an H200: the median batch ran 1.09M tokens/s while Σ tokens / Σ time read 0.84M).
    compiles_per_shape: ClassVar[bool] = False
    # Kernels that materialise a (tokens × tokens) mask over a whole pack: their memory grows with the square
    # of the batch size, not in proportion to it, and the OOM probe fits its curve accordingly.
    quadratic_memory: ClassVar[bool] = False

    def __init__(self) -> None:
        AttentionInterface.register(self.hf_name, self._transformers_attention)

    @property
    def hf_name(self) -> str:
        return HF_NAME_PREFIX + self.name

    # --- availability -----------------------------------------------------------------------------------

    def unavailable_reason(self, device: torch.device, dtype: torch.dtype) -> str | None:
        """None when this kernel runs on `device` in `dtype`; otherwise the reason, for KernelUnavailable."""
        if self.half_precision_only and dtype not in HALF_PRECISION:
            return f"it needs bf16 or fp16, not {str(dtype).removeprefix('torch.')}"
        key = (self.name, str(device), dtype)
        if key not in _AVAILABILITY:
            _AVAILABILITY[key] = self._probe_reason(device, dtype)
        return _AVAILABILITY[key]

    def _probe_reason(self, device: torch.device, dtype: torch.dtype) -> str | None:
        # Detect, don't assume: whether e.g. varlen_attn or the SDPA flash backend runs on this device
        # depends on the torch build and the GPU, so run the real op once on a tiny input.
        try:
            self.probe(device, dtype)
        except KernelUnavailable as error:
            return error.reason
        except Exception as error:  # the library's own refusal (NotImplementedError, RuntimeError, …)
            return f"{type(error).__name__}: {first_line(error).split('. ')[0][:200]}"
        return None

    def probe(self, device: torch.device, dtype: torch.dtype) -> None:
        """Run this kernel's own path (prepare, inputs, attend) once on a tiny batch; raise if it cannot."""
        batch = self.per_forward(self.prepare(tiny_batch(self.layout, device)))
        inputs = kernel_inputs(self.model_inputs(batch))
        head_dim = 64  # flash kernels need a multiple of 8; 64 is the head size of most models they run
        query = torch.randn(*batch.input_ids.shape, 2, head_dim, device=device, dtype=dtype)
        self.attend(query, query, query, head_dim ** -0.5, **inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # surface asynchronous launch errors here, not in a measurement

    def gqa_handling(self, device: torch.device, dtype: torch.dtype) -> GqaHandling:
        """How grouped-query attention runs: in the kernel itself, or by repeating K/V heads before it."""
        return "native"

    def unsupported_reason(self, features: AttentionFeatures, longest: int) -> str | None:
        """Why this kernel cannot compute this model's attention on sequences up to `longest`; None if it can."""
        reason = missing_feature_reason(self.name, features, applies_softcap=self.applies_softcap,
                                        applies_sinks=self.applies_sinks, library_reason=self.library_reason)
        if reason is not None or self.applies_window:
            return reason
        return window_reason(self.name, features.sliding_window, longest)

    def library_reason(self, parameter: str) -> str | None:
        """Why the installed library takes no `parameter` (softcap, learnable_sink) of a feature this kernel
        applies through it; None when it does, or when the kernel applies the feature itself."""
        return None

    # --- per batch ------------------------------------------------------------------------------------------

    # `windows` is `AttentionFeatures.layer_windows` of the model: the windows its layers attend within (None
    # for full attention). Kernels that mask per batch build one mask for each window a layer may call with.
    def prepare(self, batch: Batch, windows: tuple[int | None, ...] = (None,)) -> Batch:
        """Precompute, once per device-resident batch and before timing, what the forward needs."""
        return batch

    def per_forward(self, batch: Batch, windows: tuple[int | None, ...] = (None,)) -> Batch:
        """What is built inside every forward, timed with it: state too large to keep for every batch."""
        return batch

    def forward(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """Logits of the whole batch: (rows, width, vocab) padded, (1, total_tokens, vocab) packed.

        Call under `torch.inference_mode()` for inference; the batch must have been `prepare`d with the
        model's `AttentionFeatures.layer_windows`.
        """
        batch = self.per_forward(batch, AttentionFeatures.of(config_of(model)).layer_windows)
        # Layers checkpointed for training recompute their forward in the backward, under this same context.
        with replayed_in_recompute(lambda: self.kernel_context(model)):
            return model(**self.model_inputs(batch)).logits

    @contextlib.contextmanager
    def kernel_context(self, model: torch.nn.Module) -> Iterator[None]:
        """The model's attention routed to this kernel, with the kernel's runtime context."""
        with self.runtime_context(), attention_implementation(model, self.hf_name):
            yield

    def runtime_context(self) -> contextlib.AbstractContextManager[Any]:
        """A context entered once around the whole forward (e.g. pinning an SDPA backend)."""
        return contextlib.nullcontext()

    @abstractmethod
    def model_inputs(self, batch: Batch) -> dict[str, Any]:
        """Keyword arguments of the model call: input ids, position ids and `padbench_*` kernel inputs."""

    # `*args: Any, **inputs: Any` is mypy's spelling of "the rest is up to the subclass": each kernel names the
    # `padbench_*` keywords its own `model_inputs` produces as required keyword-only parameters.
    @abstractmethod
    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float,
               *args: Any, **inputs: Any) -> torch.Tensor:
        """(batch, seq, heads, head_dim) views in, the same layout out; `inputs` carry the `padbench_*` kwargs."""

    def _transformers_attention(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                value: torch.Tensor, attention_mask: torch.Tensor | None,
                                scaling: float | None = None, dropout: float = 0.0,
                                softcap: float | None = None, sliding_window: int | None = None,
                                **kwargs: Any) -> tuple[torch.Tensor, None]:
        # transformers hands over (batch, heads, seq, head_dim) transposes of the projection output;
        # transposing back is a free view with the head dimension contiguous, which every kernel accepts.
        if dropout:
            raise ValueError(f"attention kernel {self.name!r} runs without dropout (got p={dropout})")
        inputs = kernel_inputs(kwargs)
        longest = inputs.get("padbench_max_seqlen", query.shape[2])
        sinks = kwargs.get("s_aux")
        self._refuse_dropped_features(softcap, sliding_window, sinks is not None, longest=longest)
        if softcap:
            inputs["padbench_softcap"] = softcap
        if sinks is not None:
            inputs["padbench_sinks"] = sinks
        if window_bites(sliding_window, longest):  # this layer's window: None on full-attention layers
            inputs["padbench_window"] = sliding_window
        query, key, value = autocast_inputs(query, key, value)
        output = self.attend(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                             scaling if scaling is not None else query.shape[-1] ** -0.5, **inputs)
        return output, None

    def _refuse_dropped_features(self, softcap: float | None, sliding_window: int | None, sinks: bool,
                                 longest: int) -> None:
        """The call-time guard behind `unsupported_reason`: a feature this kernel would ignore is an error."""
        if softcap is None and sliding_window is None and not sinks:
            return  # most models, every layer of every forward: nothing to check
        features = AttentionFeatures(query_heads=1, kv_heads=1, softcap=softcap or None,
                                     sliding_window=sliding_window or None, sinks=sinks)
        reason = self.unsupported_reason(features, longest)
        if reason is not None:
            raise KernelUnavailable(self.name, reason)


def kernel_inputs(arguments: dict[str, Any]) -> dict[str, Any]:
    """The `padbench_*` arguments meant for a kernel, out of everything transformers forwards."""
    return {name: value for name, value in arguments.items() if name.startswith(KERNEL_INPUT_PREFIX)}


def feature_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """The soft-cap and sinks among a kernel's inputs as ops' `softcap=` / `sinks=`, only those the layer uses."""
    names = {"padbench_softcap": "softcap", "padbench_sinks": "sinks"}
    return {names[name]: value for name, value in inputs.items() if name in names}


def tiny_batch(layout: type[PaddedBatch] | type[PackedBatch], device: torch.device) -> Batch:
    """Two sequences (5 and 3 tokens) in the given layout, for availability probes."""
    lengths = (5, 3)
    if layout is PaddedBatch:
        mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], device=device)
        return PaddedBatch(input_ids=torch.zeros_like(mask), attention_mask=mask, lengths=lengths, sequence_ids=(0, 1))
    return PackedBatch(
        input_ids=torch.zeros(1, 8, dtype=torch.long, device=device),
        position_ids=torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2]], device=device),
        cu_seqlens=torch.tensor([0, 5, 8], dtype=torch.int32, device=device), max_seqlen=5,
        lengths=lengths, sequence_ids=(0, 1), token_budget=8)


def longest_sequence(batch: Batch) -> int:
    """The longest sequence a batch's attention spans: what `_transformers_attention` compares windows with."""
    return batch.max_seqlen if isinstance(batch, PackedBatch) else batch.width


@contextlib.contextmanager
def attention_implementation(model: torch.nn.Module, name: str) -> Iterator[None]:
    """Route the model's attention to `name` for one call, then restore what it was.

    The config object is shared by every layer of the model, so one attribute switches all of them;
    restoring it keeps a plain `model(...)` call (e.g. the correctness reference) on its own implementation.
    """
    config = config_of(model)
    previous = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = previous


def autocast_inputs(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Under autocast (fp32 weights computing in half precision), the tensors in its dtype. The projections
    give half precision, but rotary embeddings multiply them with fp32 cos/sin tables (fp32 because the
    hidden states are), which promotes them back; flash kernels take only half precision. transformers' own
    flash path casts them the same way."""
    device = tensors[0].device.type
    if not torch.is_autocast_enabled(device) or tensors[0].dtype != torch.float32:
        return tensors
    dtype = torch.get_autocast_dtype(device)
    return tuple(tensor.to(dtype) for tensor in tensors)
