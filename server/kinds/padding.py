"""The server's policy for padding jobs: the attention families a worker must offer, the tokens and FLOPs the
job would feed through its model, and the data, tokenizer and model names it reads from the worker's roots.
"""

from __future__ import annotations

from padbench.contract.hub_dataset import is_hub_dataset
from padbench.contract.model_spec import ModelSpec, weights_upper_bound
from padbench.contract.padding import PaddingJobSpec
from padbench.contract.spec import DataSpec
from padbench.server.kinds.base import KIND_POLICIES, JobCost, KindPolicy, NamedPath, device_requirements

# Training does a backward pass of about twice the forward's work (the usual 6·N vs 2·N per token).
TRAINING_FACTOR = 3
# A data source that is not a file: generated. Hub data sets (`hf:`) are not files either; the contract
# admits only names of the Hub's form for them.
NOT_FILES = ("synthetic",)


def padding_requirements(spec: PaddingJobSpec) -> set[str]:
    """Every attention family the strategies name (`flash`, `sdpa`, `flex`, …), every experts implementation
    (`grouped_mm`, …), and the device if pinned."""
    families = {f"attention:{spec.attention_for(strategy)}" for strategy in spec.strategies}
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


def model_and_data_paths(data: DataSpec, model: ModelSpec) -> list[NamedPath]:
    """The file names of the specs of kinds that read data and build a model: the source, tokenizer, model."""
    found: list[NamedPath] = []
    if data.source not in NOT_FILES and not is_hub_dataset(data.source):
        found.append((["spec", "data", "source"], data.source))
    if data.tokenizer is not None:
        found.append((["spec", "data", "tokenizer"], data.tokenizer))
    if model.path is not None:
        found.append((["spec", "model", "path"], model.path))
    return found


def padding_paths(spec: PaddingJobSpec) -> list[NamedPath]:
    return model_and_data_paths(spec.data, spec.model)


KIND_POLICIES.add("padding", KindPolicy[PaddingJobSpec](
    requirements=padding_requirements, cost=padding_cost, named_paths=padding_paths))
