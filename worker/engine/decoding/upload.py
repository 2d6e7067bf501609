"""A step's plan as the device reads it: one int64 array, packed on the host and copied in one transfer.

The same layout serves an eager step (a fresh device copy) and a CUDA graph (a static buffer the graph reads,
refilled before each replay), so a step's fields are views of one buffer either way. Its size depends only on
the step's shape: tokens, query segments and outputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from padbench.worker.engine.decoding.cache import HostPlan

FIELDS = ("tokens", "source_slot", "positions", "write_index", "cu_q", "k_start", "k_used", "logit_rows", "out_slot",
          "out_row", "out_col")


@dataclass(frozen=True)
class StepShape:
    tokens: int
    segments: int  # query segments: the slots, and the padding segment of a padded step
    outputs: int  # next tokens chosen (logit rows)

    @classmethod
    def of(cls, plan: HostPlan) -> StepShape:
        return cls(len(plan.tokens), len(plan.query_counts), len(plan.logit_rows))

    def sizes(self) -> dict[str, int]:
        per_token, per_output = dict.fromkeys(FIELDS[:4], self.tokens), dict.fromkeys(FIELDS[7:], self.outputs)
        return {**per_token, "cu_q": self.segments + 1, "k_start": self.segments + 1, "k_used": self.segments,
                **per_output}

    @property
    def length(self) -> int:
        return sum(self.sizes().values())


def pack(plan: HostPlan, cache_rows: int) -> np.ndarray:
    """The plan's fields in `FIELDS` order; `k_start` ends with the cache's row count (varlen's last offset)."""
    cu_q = np.concatenate([[0], np.cumsum(plan.query_counts)])
    k_start = np.concatenate([plan.k_start, [cache_rows]])
    return np.concatenate([plan.tokens, plan.source_slot, plan.positions, plan.write_index, cu_q, k_start,
                           plan.k_used, plan.logit_rows, plan.out_slot, plan.out_row, plan.out_col]).astype(np.int64)


def views(buffer: torch.Tensor, shape: StepShape) -> dict[str, torch.Tensor]:
    fields, offset = {}, 0
    for name, size in shape.sizes().items():
        fields[name] = buffer[offset:offset + size]
        offset += size
    return fields


def upload(plan: HostPlan, cache_rows: int, device: torch.device) -> dict[str, torch.Tensor]:
    """A fresh device copy of the plan (asynchronous from pinned memory on CUDA)."""
    packed = torch.from_numpy(pack(plan, cache_rows))
    on_device = packed.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else packed
    return views(on_device, StepShape.of(plan))


def stage(buffer: torch.Tensor, plan: HostPlan, cache_rows: int) -> None:
    """Refills a graph's static input buffer with the plan, asynchronously."""
    buffer.copy_(torch.from_numpy(pack(plan, cache_rows)).pin_memory(), non_blocking=True)
