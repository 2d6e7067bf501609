"""How the tests' `math` family computes: SDPA's math backend over the masks padbench's masked kernels build (padded
rows, packs) and over each slot's range of the KV cache (decoding). Only the computation is here; the names and
what the kernels apply are the family's declaration (`math_family.py`)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from padbench.worker.engine.attention import ops
from padbench.worker.engine.attention.packed import BlockDiagonalMaskKernel
from padbench.worker.engine.attention.padded import PaddingMaskKernel
from padbench.worker.engine.decoding.kernels import SlotLoopKernel, causal_window_mask


def math_dense(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, **arguments: Any) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.MATH):
        return ops.sdpa_dense(query, key, value, **arguments)


class MathPadded(PaddingMaskKernel):
    masked_op = staticmethod(math_dense)


class MathBlockMask(BlockDiagonalMaskKernel):
    masked_op = staticmethod(math_dense)


class MathDecode(SlotLoopKernel):
    graph_safe = False  # slot by slot from host integers: no batched path for a CUDA graph

    def attend_one(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, softcap: float | None,
                   window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        mask = causal_window_mask(q.shape[0], k.shape[0], window, q.device)
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                                 attn_mask=mask, scale=scale, enable_gqa=True)
        return out.transpose(0, 1)
