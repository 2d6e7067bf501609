"""Kernels for right-padded rows (static, dynamic and binned strategies).

Rows are right-padded and attention is causal, so a real token only ever sees earlier real tokens: the
flash kernels need no mask at all (pad positions compute garbage that nobody reads). The masked kernels
(`sdpa`, `flex-padding-mask`, `eager`) are the baselines that also keep pads from seeing pads, exactly as
transformers' own padding mask does; their masks are built once per batch in `prepare`.

Each class is how a kernel computes; its name, family and what it applies are declared in its family's module
(`padbench/kernels/<family>.py`), which names the class, and bound to it when the worker loads the family.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import BlockMask

from padbench.worker.engine.attention import masks, ops
from padbench.worker.engine.attention.base import AttentionKernel, feature_inputs
from padbench.worker.engine.attention.features import GqaHandling
from padbench.worker.engine.attention.kernel_kinds import FlashLibraryKernel, FlexKernel, MaskedKernel
from padbench.worker.engine.data.batches import Batch, PaddedBatch


class PaddedKernel(AttentionKernel):
    layout = PaddedBatch

    def model_inputs(self, batch: Batch) -> dict[str, Any]:
        # No attention_mask for transformers: positions default to 0..width-1, which is right for
        # right-padded rows, and the kernel's own mask (if any) travels in extras.
        return {"input_ids": batch.input_ids, **batch.extras}


class TorchFlashPadded(PaddedKernel):
    """torch's SDPA pinned to its flash backend (`sdpa_kernel(SDPBackend.FLASH_ATTENTION)`).

    With only that backend allowed, SDPA raises on inputs the flash kernel cannot take instead of silently
    falling back to another backend, so a result labelled torch-flash really ran the flash kernel. It takes
    no mask and no window (only `is_causal`), so it is refused for a model whose window sequences outgrow.
    """

    def runtime_context(self) -> Any:
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)

    def probe(self, device: torch.device, dtype: torch.dtype) -> None:
        with self.runtime_context():
            super().probe(device, dtype)

    def gqa_handling(self, device: torch.device, dtype: torch.dtype) -> GqaHandling:
        return "native" if _flash_sdpa_takes_gqa(device, dtype) else "expanded"

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float,
               **inputs: Any) -> torch.Tensor:
        if query.shape[-2] != key.shape[-2] and not _flash_sdpa_takes_gqa(query.device, query.dtype):
            key, value = ops.expand_kv_heads(query, key, value)
        return ops.sdpa_dense(query, key, value, causal=True, scale=scale)


@functools.cache
def _flash_sdpa_takes_gqa(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether SDPA's flash backend accepts fewer K/V heads here (`enable_gqa`); builds and GPUs differ."""
    query = torch.zeros(1, 4, 2, 64, device=device, dtype=dtype)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ops.sdpa_dense(query, query[:, :, :1], query[:, :, :1], causal=True)
    except RuntimeError:
        return False
    return True


class FlashAttnPadded(PaddedKernel, FlashLibraryKernel):
    library, library_function = "flash-attn", "flash_attn_func"

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_window: int | None = None, **inputs: Any) -> torch.Tensor:
        return ops.flash_attn_dense(query, key, value, causal=True, scale=scale, window=padbench_window,
                                    **feature_inputs(inputs))


class FlashAttn3Padded(PaddedKernel, FlashLibraryKernel):
    library, library_function = "flash-attn-3", "flash_attn_func"

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_window: int | None = None, **inputs: Any) -> torch.Tensor:
        return ops.flash_attn_3_dense(query, key, value, causal=True, scale=scale, window=padbench_window,
                                      **feature_inputs(inputs))


class FlashAttnCutePadded(PaddedKernel, FlashLibraryKernel):
    compiles_per_shape = True
    library, library_function = "flash-attn-cute", "flash_attn_func"

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_window: int | None = None, **inputs: Any) -> torch.Tensor:
        return ops.flash_attn_cute_dense(query, key, value, causal=True, scale=scale, window=padbench_window,
                                         **feature_inputs(inputs))


def _device_lengths(batch: Batch) -> torch.Tensor:
    """Each row's real length, computed on the device: masks built inside a forward never read the host."""
    assert isinstance(batch, PaddedBatch)
    return batch.attention_mask.sum(dim=1)


class PaddingMaskKernel(PaddedKernel, MaskedKernel):
    def build_mask(self, batch: Batch, window: int | None) -> torch.Tensor:
        return masks.padding_causal(_device_lengths(batch), batch.input_ids.shape[1], window)


class SdpaPadded(PaddingMaskKernel):
    """torch's SDPA with the padding mask, backend chosen by torch (what transformers' `sdpa` does)."""

    masked_op = staticmethod(ops.sdpa_dense)


class EagerPadded(PaddingMaskKernel):
    """The materialised score matrix with the padding mask: the plain implementation."""

    masked_op = staticmethod(ops.naive_dense)

    def gqa_handling(self, device: torch.device, dtype: torch.dtype) -> GqaHandling:
        return "expanded"  # the materialised scores need one key per query head


class FlexPadded(PaddedKernel, FlexKernel):
    """FlexAttention with a causal-and-real-keys block mask: fully padded tiles are skipped."""

    # Compiled with dynamic shapes, flex still recompiles where dynamo specialises a size (a batch of one row,
    # rows of one 128-token block), and binned batches have such shapes. On an H100, Gemma 2's uncompiled
    # binned training read flex at 0.62x eager while those recompiles were timed, and on par once the warm-up
    # ran every shape. (Packs differ in length nearly every batch, so there a warm-up per shape would be a
    # whole untimed pass: their warm-up covers the smallest and largest pack, and a graph compiled inside a
    # measurement marks the row invalid.)
    compiles_per_shape = True

    def build_block_mask(self, batch: Batch, window: int | None) -> BlockMask:
        return masks.padding_causal_block_mask(_device_lengths(batch), batch.input_ids.shape[1], window)
