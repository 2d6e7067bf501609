"""Kernels for packed rows: many sequences concatenated into one (1, total_tokens) row.

Position ids restart per sequence (the strategy builds them), and each kernel keeps attention inside each
sequence: the varlen kernels through `cu_seqlens` and the Python-int maximum length the strategy computed
once per batch; flex through a document block mask; `sdpa`/`eager` through the materialised block-diagonal
causal mask — O(total²) memory, the "packed without flash" baseline.

As for padded rows, each kernel's name, family and facts are its family's declaration (`padbench/kernels/`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch.nn.attention.flex_attention import BlockMask

from padbench.worker.engine.attention import masks, ops
from padbench.worker.engine.attention.base import AttentionKernel, feature_inputs
from padbench.worker.engine.attention.features import AttentionFeatures, GqaHandling, window_bites
from padbench.worker.engine.attention.kernel_kinds import FlashLibraryKernel, FlexKernel, MaskedKernel
from padbench.worker.engine.attention.libraries import KernelUnavailable
from padbench.worker.engine.data.batches import Batch, PackedBatch


class PackedKernel(AttentionKernel):
    layout = PackedBatch

    def model_inputs(self, batch: Batch) -> dict[str, Any]:
        assert isinstance(batch, PackedBatch)
        # The longest sequence travels as a Python int: every kernel's feature guard reads it, and the varlen
        # kernels pass it on, without a device read.
        return {"input_ids": batch.input_ids, "position_ids": batch.position_ids,
                "padbench_max_seqlen": batch.max_seqlen, **batch.extras}


class VarlenKernel(PackedKernel):
    """Flash varlen: attention over (total_tokens, heads, head_dim) bounded by cu_seqlens, no mask at all. Each
    call takes the layer's window as a flash (left, right) window_size."""

    varlen: ClassVar[Callable[..., torch.Tensor]]  # the ops-level call: (q, k, v, cu_q, cu_k, max_q, max_k, …)

    def model_inputs(self, batch: Batch) -> dict[str, Any]:
        assert isinstance(batch, PackedBatch)
        return {**super().model_inputs(batch), "padbench_cu_seqlens": batch.cu_seqlens}

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_cu_seqlens: torch.Tensor, padbench_max_seqlen: int, padbench_window: int | None = None,
               **inputs: Any) -> torch.Tensor:
        # Dropping the batch dimension of 1 is a view: the head dimension stays contiguous, no copy. The
        # window applies within each sequence: flash varlen kernels count positions from each cu_seqlens start.
        output = self.varlen(query[0], key[0], value[0], padbench_cu_seqlens, padbench_cu_seqlens,
                             padbench_max_seqlen, padbench_max_seqlen, causal=True, scale=scale,
                             window=padbench_window, **feature_inputs(inputs))
        return output.unsqueeze(0)


class TorchFlashVarlen(VarlenKernel):
    varlen = staticmethod(ops.torch_varlen)

    def gqa_handling(self, device: torch.device, dtype: torch.dtype) -> GqaHandling:
        try:
            return "native" if ops.torch_varlen_takes_gqa() else "expanded"
        except KernelUnavailable:  # no varlen_attn at all: the kernel never runs, nothing to record
            return "native"

    def unsupported_reason(self, features: AttentionFeatures, longest: int) -> str | None:
        reason = super().unsupported_reason(features, longest)
        if reason is None and window_bites(features.sliding_window, longest) and not _varlen_takes_window():
            return (f"torch {torch.__version__}'s varlen_attn takes no window_size (2.11+ does), and the model "
                    f"attends within a sliding window of {features.sliding_window} tokens")
        return reason


def _varlen_takes_window() -> bool:
    try:
        return ops.torch_varlen_takes_window()
    except KernelUnavailable:  # no varlen_attn at all: availability refuses the kernel with its own reason
        return True


class FlashAttnVarlen(VarlenKernel, FlashLibraryKernel):
    library, library_function = "flash-attn", "flash_attn_varlen_func"
    varlen = staticmethod(ops.flash_attn_varlen)


class FlashAttn3Varlen(VarlenKernel, FlashLibraryKernel):
    library, library_function = "flash-attn-3", "flash_attn_varlen_func"
    varlen = staticmethod(ops.flash_attn_3_varlen)


class FlashAttnCuteVarlen(VarlenKernel, FlashLibraryKernel):
    compiles_per_shape = True
    library, library_function = "flash-attn-cute", "flash_attn_varlen_func"
    varlen = staticmethod(ops.flash_attn_cute_varlen)


def _document_ids(batch: Batch) -> torch.Tensor:
    assert isinstance(batch, PackedBatch)
    return masks.document_ids_from_cu_seqlens(batch.cu_seqlens, batch.computed_tokens)


class BlockDiagonalMaskKernel(PackedKernel, MaskedKernel):
    quadratic_memory = True

    def build_mask(self, batch: Batch, window: int | None) -> torch.Tensor:
        return masks.block_diagonal_causal(_document_ids(batch), window)[None, None]  # (1, 1, total, total)


class SdpaBlockMask(BlockDiagonalMaskKernel):
    masked_op = staticmethod(ops.sdpa_dense)


class EagerBlockMask(BlockDiagonalMaskKernel):
    masked_op = staticmethod(ops.naive_dense)

    def gqa_handling(self, device: torch.device, dtype: torch.dtype) -> GqaHandling:
        return "expanded"  # the materialised scores need one key per query head


class FlexDocumentMask(PackedKernel, FlexKernel):
    """FlexAttention with a document-and-causal block mask: tiles across documents are skipped."""

    def build_block_mask(self, batch: Batch, window: int | None) -> BlockMask:
        return masks.document_causal_block_mask(_document_ids(batch), window)
