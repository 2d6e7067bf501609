"""What a job will cost, estimated from its spec alone, so the server can refuse what no worker should run.

Every field has its own bound in the contract, but bounds multiply: 10M samples × 1M tokens × 100 repeats
is within each field's limit and still years of GPU time. Each kind's policy estimates an upper bound,
cheap to compute and never needing a file (`padbench/kinds/<kind>/policy.py`): for a padding job the tokens
it would feed through the model (samples × max_length, per strategy and repeat) and the FLOPs of those tokens when the
architecture is known without reading files; for an attention sweep, the FLOPs of every kernel call across
its cells. The limits are the server's settings (`PADBENCH_MAX_JOB_TOKENS`, `PADBENCH_MAX_JOB_FLOPS`).
"""

from __future__ import annotations

from padbench.contract.spec import JobSpecBase
from padbench.kinds.policy import JobCost
from padbench.kinds.record import kind_spec


def job_cost(spec: JobSpecBase) -> JobCost:
    return kind_spec(spec.kind).policy.cost(spec)


def over_limits(spec: JobSpecBase, *, max_tokens: int, max_flops: float) -> str | None:
    """Why the job exceeds the server's limits, or None when it fits."""
    cost = job_cost(spec)
    if cost.tokens > max_tokens:
        return (f"the job would process about {cost.tokens:.3g} tokens (every sample or request at its longest, "
                f"per row and repeat), over this server's limit of {max_tokens:.3g} (PADBENCH_MAX_JOB_TOKENS)")
    if cost.flops is not None and cost.flops > max_flops:
        return (f"the job would compute about {cost.flops:.3g} FLOPs, over this server's limit of "
                f"{max_flops:.3g} (PADBENCH_MAX_JOB_FLOPS)")
    return None
