"""What a job will cost, estimated from its spec alone, so the server can refuse what no worker should run.

Every field has its own bound in the contract, but bounds multiply: 10M samples × 1M tokens × 100 repeats
is within each field's limit and still years of GPU time. The estimate is an upper bound, cheap to compute
and never needs a file: tokens the padding job would feed through the model (samples × max_length, per
strategy and repeat) and the FLOPs of those tokens when the architecture is known without reading files;
for an attention sweep, the FLOPs of every kernel call across its cells. The limits are the server's
settings (`PADBENCH_MAX_JOB_TOKENS`, `PADBENCH_MAX_JOB_FLOPS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from padbench.contract.model_spec import weights_upper_bound
from padbench.contract.spec import AttentionJobSpec, PaddingJobSpec

# Training does a backward pass of about twice the forward's work (the usual 6·N vs 2·N per token).
TRAINING_FACTOR = 3
# An attention call is QKᵀ and AV: 2 matmuls of 2·L²·D FLOPs per head; forward+backward is ~3.5 forwards
# (FlashAttention's accounting: backward recomputes the scores).
ATTENTION_BACKWARD_FACTOR = 3.5


@dataclass(frozen=True)
class JobCost:
    tokens: int  # tokens fed through the model (padding jobs) or 0 (sweeps)
    flops: float | None  # None when the model is only known by files the server never reads


def padding_cost(spec: PaddingJobSpec) -> JobCost:
    sizes = sum(len(spec.batch_sizes_for(strategy)) for strategy in spec.strategies)
    tokens = spec.data.num_samples * spec.data.max_length * sizes * spec.measurement.repeats
    weights = weights_upper_bound(spec.model.architecture())
    if weights is None:
        return JobCost(tokens=tokens, flops=None)
    factor = TRAINING_FACTOR if spec.mode == "training" else 1
    return JobCost(tokens=tokens, flops=2.0 * weights * tokens * factor)


def attention_cost(spec: AttentionJobSpec) -> JobCost:
    calls = (spec.warmup + spec.repeats) * len(spec.kernels)
    per_call = sum(4.0 * spec.batch * spec.heads * seq_len**2 * spec.head_dim for seq_len in spec.seq_lens)
    factor = ATTENTION_BACKWARD_FACTOR if spec.direction == "forward+backward" else 1.0
    return JobCost(tokens=0, flops=per_call * calls * factor)


def job_cost(spec: PaddingJobSpec | AttentionJobSpec) -> JobCost:
    return padding_cost(spec) if isinstance(spec, PaddingJobSpec) else attention_cost(spec)


def over_limits(spec: PaddingJobSpec | AttentionJobSpec, *, max_tokens: int, max_flops: float) -> str | None:
    """Why the job exceeds the server's limits, or None when it fits."""
    cost = job_cost(spec)
    if cost.tokens > max_tokens:
        return (f"the job would process about {cost.tokens:.3g} tokens (samples × max_length × strategies × "
                f"repeats), over this server's limit of {max_tokens:.3g} (PADBENCH_MAX_JOB_TOKENS)")
    if cost.flops is not None and cost.flops > max_flops:
        return (f"the job would compute about {cost.flops:.3g} FLOPs, over this server's limit of "
                f"{max_flops:.3g} (PADBENCH_MAX_JOB_FLOPS)")
    return None
