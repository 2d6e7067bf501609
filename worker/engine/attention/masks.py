"""Which keys each query may attend to, for the masked and FlexAttention kernels of both layouts.

Every mask here is causal within one sequence and, given a `window`, also keeps to transformers' sliding
window: a query at position i attends to keys j with i − window < j ≤ i (masking_utils'
`sliding_window_overlay` is `kv_idx > q_idx - sliding_window`, ANDed with the causal `kv_idx <= q_idx`).
In a packed row positions restart per sequence, so within one sequence the flat index distance is the
position distance: the band on flat indices, ANDed with the same-sequence test, is the per-sequence window.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask

# --- FlexAttention block masks ---------------------------------------------------------------------------


def causal_block_mask(length: int, device: torch.device) -> BlockMask:
    def causal(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return q_index >= kv_index

    return create_block_mask(causal, None, None, length, length, device=device)


def _within(window: int | None, q_index: Any, kv_index: Any) -> Any:
    """The sliding-window band of a mask_mod (i − window < j); True when there is no window."""
    return True if window is None else q_index - kv_index < window


def document_causal_block_mask(document_ids: torch.Tensor, window: int | None = None) -> BlockMask:
    """Causal attention within each document of one packed row; `document_ids` is (total_tokens,)."""

    def same_document_causal(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return (document_ids[q_index] == document_ids[kv_index]) & (q_index >= kv_index) & _within(
            window, q_index, kv_index)

    total = document_ids.shape[0]
    return create_block_mask(same_document_causal, None, None, total, total, device=document_ids.device,
                             _compile=document_ids.is_cuda)


def padding_causal_block_mask(lengths: torch.Tensor, width: int, window: int | None = None) -> BlockMask:
    """Causal attention over each right-padded row's real tokens; `lengths` is (rows,) on the device."""

    def causal_over_real_keys(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        # Pad queries (past the row's length) skip the band, as in `padding_causal`.
        return (kv_index < lengths[batch]) & (q_index >= kv_index) & (
            _within(window, q_index, kv_index) | (q_index >= lengths[batch]))

    return create_block_mask(causal_over_real_keys, lengths.shape[0], None, width, width, device=lengths.device,
                             _compile=lengths.is_cuda)


# --- materialised masks ------------------------------------------------------------------------------------

def document_ids_from_cu_seqlens(cu_seqlens: torch.Tensor, total: int) -> torch.Tensor:
    """(total,) int32: the index of the document each packed token belongs to."""
    counts = (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    return torch.repeat_interleave(torch.arange(counts.numel(), device=cu_seqlens.device, dtype=torch.int32),
                                   counts, output_size=total)


def block_diagonal_causal(document_ids: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """(total, total) bool: token i attends to token j iff same document and j ≤ i (and i − window < j).

    O(total²) memory.
    """
    mask = (document_ids[:, None] == document_ids[None, :]).tril_()
    return mask if window is None else mask.triu_(1 - window)


def padding_causal(lengths: torch.Tensor, width: int, window: int | None = None) -> torch.Tensor:
    """(rows, 1, width, width) bool: causal attention over each right-padded row's real keys.

    Pad queries still see their row's real keys, so no row of the mask is empty: an empty row makes SDPA's
    softmax NaN, and a NaN in a pad position's values poisons the real queries of the next layer through
    0 · NaN even though their weight on it is zero. So the window bands real queries only; a pad query
    further than a window past the row's end keeps every real key.
    """
    positions = torch.arange(width, device=lengths.device)
    real = positions[None, :] < lengths[:, None]  # (rows, width): real keys, and equally real queries
    allowed = (positions[:, None] >= positions[None, :])[None, :, :] & real[:, None, :]
    if window is not None:
        near = positions[:, None] - positions[None, :] < window
        allowed &= near[None, :, :] | ~real[:, :, None]
    return allowed.unsqueeze(1)
