"""Kernel kinds shared by both layouts: a flash library's call, a materialised mask, a FlexAttention block mask.

`padded.py` and `packed.py` subclass them with the layout's own masks and library functions.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

import torch
from torch.nn.attention.flex_attention import BlockMask

from padbench.worker.engine.attention import flex, libraries, masks
from padbench.worker.engine.attention.base import AttentionKernel, feature_inputs, longest_sequence
from padbench.worker.engine.attention.features import batch_windows, mask_for
from padbench.worker.engine.data.batches import Batch


class FlashLibraryKernel(AttentionKernel):
    """A kernel calling flash-attn or flash-attn-4, whose versions differ in the features their functions take."""

    library: ClassVar[str]  # whose module it calls, a key of `ops.FLASH_MODULES`: `flash-attn`, `flash-attn-cute`
    library_function: ClassVar[str]  # the function of that module the kernel calls

    def library_reason(self, parameter: str) -> str | None:
        return libraries.flash_library_reason(self.library, self.library_function, parameter)


class MaskedKernel(AttentionKernel):
    """Attention through a boolean mask (True = attend), materialised inside every forward.

    Not in `prepare`: every batch is on the device before timing, and a packed batch's mask is
    O(tokens²) — 4 GB for a 63,000-token pack. Kept for all 31 packs of a run, the masks ran an H200 out of
    memory at a budget the OOM probe, with its one batch, had found to fit. transformers, too, builds its
    4-D masks inside the forward, so the mask is part of this layout's measured cost.
    """

    masked_op: ClassVar[Callable[..., torch.Tensor]]  # ops.sdpa_dense or ops.naive_dense

    @abstractmethod
    def build_mask(self, batch: Batch, window: int | None) -> torch.Tensor:
        """The mask for the whole batch, broadcastable to (rows, heads, width, width)."""

    def per_forward(self, batch: Batch, windows: tuple[int | None, ...] = (None,)) -> Batch:
        # The mask is built per batch, not per layer: one for each window the layers use, as transformers
        # builds a full and a sliding mask per forward for models with both kinds of layer.
        built = {window: self.build_mask(batch, window) for window in batch_windows(windows, longest_sequence(batch))}
        return replace(batch, extras={**batch.extras, "padbench_masks": built})

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_masks: dict[int | None, torch.Tensor], padbench_window: int | None = None,
               **inputs: Any) -> torch.Tensor:
        return self.masked_op(query, key, value, causal=False, scale=scale,
                              mask=mask_for(padbench_masks, padbench_window, self.name), **feature_inputs(inputs))


class FlexKernel(AttentionKernel):
    """FlexAttention with a block mask built once per batch in `prepare`: fully masked tiles are skipped.

    Soft-capping runs inside the fused kernel as a score_mod, combined with the block mask; sinks rescale its
    output by the log-sum-exp it returns (`flex.flex_dense`).
    """

    @abstractmethod
    def build_block_mask(self, batch: Batch, window: int | None) -> BlockMask: ...

    def probe(self, device: torch.device, dtype: torch.dtype) -> None:
        # The op itself, uncompiled: compiling flex on CUDA takes tens of seconds, too long for a capability
        # probe; the first real batch compiles it (outside timing, in the warm-up).
        query = torch.randn(1, 2, 128, 64, device=device, dtype=dtype)
        flex.flex_reference(query, query, query, masks.causal_block_mask(128, device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def prepare(self, batch: Batch, windows: tuple[int | None, ...] = (None,)) -> Batch:
        built = {window: self.build_block_mask(batch, window)
                 for window in batch_windows(windows, longest_sequence(batch))}
        return replace(batch, extras={**batch.extras, "padbench_block_masks": built})

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_block_masks: dict[int | None, BlockMask], padbench_window: int | None = None,
               **inputs: Any) -> torch.Tensor:
        return flex.flex_dense(query, key, value, mask_for(padbench_block_masks, padbench_window, self.name),
                              scale=scale, **feature_inputs(inputs))
