"""The server's policy for attention sweeps: gated on the device only, costed by the FLOPs of every call.

A sweep names sweep kernels, which it records cell by cell as `unsupported` where they cannot run, so a
worker need not offer them to claim it.
"""

from __future__ import annotations

from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.kinds.policy import JobCost, KindPolicy, device_requirements, no_paths

# An attention call is QKᵀ and AV: 2 matmuls of 2·L²·D FLOPs per head; forward+backward is ~3.5 forwards
# (FlashAttention's accounting: backward recomputes the scores).
ATTENTION_BACKWARD_FACTOR = 3.5


def attention_requirements(spec: AttentionJobSpec) -> set[str]:
    return device_requirements(spec.device)


def attention_cost(spec: AttentionJobSpec) -> JobCost:
    calls = (spec.warmup + spec.repeats) * len(spec.kernels)
    per_call = sum(4.0 * spec.batch * spec.heads * seq_len**2 * spec.head_dim for seq_len in spec.seq_lens)
    factor = ATTENTION_BACKWARD_FACTOR if spec.direction == "forward+backward" else 1.0
    return JobCost(tokens=0, flops=per_call * calls * factor)


POLICY = KindPolicy[AttentionJobSpec](
    requirements=attention_requirements, cost=attention_cost, named_paths=no_paths)
