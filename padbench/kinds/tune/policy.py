"""The server's policy for tune jobs: a device if the spec pins one, no FLOP bound (the budget bounds the time), and
the data, tokenizer and model names it reads from the worker's roots, as a padding job's."""

from __future__ import annotations

from padbench.kinds.policy import JobCost, KindPolicy, NamedPath, device_requirements, model_and_data_paths
from padbench.kinds.tune.contract import TuneJobSpec


def tune_requirements(spec: TuneJobSpec) -> set[str]:
    return device_requirements(spec.device)


def tune_cost(spec: TuneJobSpec) -> JobCost:
    # Its trials stop at the budget, whatever they feed through the model: the budget is the bound.
    return JobCost(tokens=0, flops=None)


def tune_paths(spec: TuneJobSpec) -> list[NamedPath]:
    return model_and_data_paths(spec.data, spec.model)


POLICY = KindPolicy[TuneJobSpec](requirements=tune_requirements, cost=tune_cost, named_paths=tune_paths)
