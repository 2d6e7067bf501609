"""The server's policy for padding jobs: the attention families a worker must offer, the tokens and FLOPs the
job would feed through its model, and the data, tokenizer and model names it reads from the worker's roots.
"""

from __future__ import annotations

from padbench.contract.model_spec import weights_upper_bound
from padbench.contract.spec import PaddingJobSpec
from padbench.server.kinds.base import KIND_POLICIES, JobCost, KindPolicy, NamedPath, device_requirements

# Training does a backward pass of about twice the forward's work (the usual 6·N vs 2·N per token).
TRAINING_FACTOR = 3
# Data sources that are not files: generated, or read from the Hugging Face hub.
NOT_FILES = ("synthetic",)
HUB_PREFIX = "hf:"


def padding_requirements(spec: PaddingJobSpec) -> set[str]:
    """Every attention family the strategies name (`flash`, `sdpa`, `flex`, …), and the device if pinned."""
    families = {f"attention:{spec.attention_for(strategy)}" for strategy in spec.strategies}
    return families | device_requirements(spec.device)


def padding_cost(spec: PaddingJobSpec) -> JobCost:
    sizes = sum(len(spec.batch_sizes_for(strategy)) for strategy in spec.strategies)
    tokens = spec.data.num_samples * spec.data.max_length * sizes * spec.measurement.repeats
    weights = weights_upper_bound(spec.model.architecture())
    if weights is None:
        return JobCost(tokens=tokens, flops=None)
    factor = TRAINING_FACTOR if spec.mode == "training" else 1
    return JobCost(tokens=tokens, flops=2.0 * weights * tokens * factor)


def padding_paths(spec: PaddingJobSpec) -> list[NamedPath]:
    found: list[NamedPath] = []
    if spec.data.source not in NOT_FILES and not spec.data.source.startswith(HUB_PREFIX):
        found.append((["spec", "data", "source"], spec.data.source))
    if spec.data.tokenizer is not None:
        found.append((["spec", "data", "tokenizer"], spec.data.tokenizer))
    if spec.model.path is not None:
        found.append((["spec", "model", "path"], spec.model.path))
    return found


KIND_POLICIES.add("padding", KindPolicy[PaddingJobSpec](
    requirements=padding_requirements, cost=padding_cost, named_paths=padding_paths))
