"""The server's policy for padding jobs: the attention families a worker must offer, the tokens and FLOPs the
job would feed through its model, and the data, tokenizer and model names it reads from the worker's roots.
"""

from __future__ import annotations

from padbench.contract.model_spec import weights_upper_bound
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.policy import (
    JobCost,
    KindPolicy,
    NamedPath,
    attention_requirement,
    device_requirements,
    model_and_data_paths,
)

# Training does a backward pass of about twice the forward's work (the usual 6·N vs 2·N per token).
TRAINING_FACTOR = 3


def padding_requirements(spec: PaddingJobSpec) -> set[str]:
    """Every attention family the strategies name (`flash`, `sdpa`, `flex`, …), every experts implementation
    (`grouped_mm`, …), and the device if pinned."""
    families = {attention_requirement(spec.kind, spec.attention_for(strategy)) for strategy in spec.strategies}
    experts = {f"experts:{name}" for strategy in spec.strategies for name in spec.experts_for(strategy) if name}
    return families | experts | device_requirements(spec.device)


def padding_cost(spec: PaddingJobSpec) -> JobCost:
    rows = sum(len(spec.batch_sizes_for(strategy)) * len(spec.experts_for(strategy)) for strategy in spec.strategies)
    tokens = spec.data.num_samples * spec.data.max_length * rows * spec.measurement.repeats
    weights = weights_upper_bound(spec.model.architecture())
    if weights is None:
        return JobCost(tokens=tokens, flops=None)
    factor = TRAINING_FACTOR if spec.mode == "training" else 1
    return JobCost(tokens=tokens, flops=2.0 * weights * tokens * factor)


def padding_paths(spec: PaddingJobSpec) -> list[NamedPath]:
    return model_and_data_paths(spec.data, spec.model)


POLICY = KindPolicy[PaddingJobSpec](
    requirements=padding_requirements, cost=padding_cost, named_paths=padding_paths)
