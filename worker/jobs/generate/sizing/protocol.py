"""What the generate probe's parent sends a child: one size under the job's settings.

Kept free of torch: the request is unpickled in the child, where nothing may touch the device before the
environment (PYTORCH_CUDA_ALLOC_CONF) is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from padbench.contract.spec import Dtype, ModelSpec

# Decode steps after the prefill: the first grows the allocator and builds workspaces, the later ones show
# the transient peaks of a warmed-up step, which is what the measurement sees.
DECODE_STEPS = 3


@dataclass(frozen=True)
class SlotsRequest:
    """`size` sequences decoding at once, each with the job's longest prompt and longest output."""

    model: ModelSpec
    dtype: Dtype
    device: Literal["cuda", "cpu"]
    attention: str  # as the spec asks; the child resolves the decode kernel the rows will resolve
    size: int
    prompt_tokens: int  # the longest prompt any row can have
    output_tokens: int  # the longest output any request asks for
    seed: int
    cpu_memory_budget_bytes: int | None = None
    decode_steps: int = DECODE_STEPS
