"""Mixtures of experts in the contract: how a spec names the experts' implementation, and what a row states
about the routed work.

transformers runs a mixture-of-experts layer's expert matmuls through its experts interface
(https://huggingface.co/docs/transformers/main/en/experts_interface): `eager` loops over the experts that
received tokens, `batched_mm` gathers each routed token's expert weights and runs one batched matmul,
`grouped_mm` sorts the routed tokens by expert and runs torch's grouped matmul. A spec's `experts` names
one or a list; a list measures every strategy with each (one row per implementation).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from padbench.contract.bounds import one_or_list

# Config attributes that count routed experts in the mixture-of-experts families transformers ships.
EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
ExpertsName = Literal["eager", "batched_mm", "grouped_mm"]
EXPERTS_NAMES: tuple[str, ...] = ("eager", "batched_mm", "grouped_mm")
MAX_EXPERTS_CHOICES = len(EXPERTS_NAMES)


ExpertsChoice = Annotated[
    ExpertsName | Annotated[list[ExpertsName], Field(min_length=1, max_length=MAX_EXPERTS_CHOICES)],
    one_or_list(f"one of {', '.join(EXPERTS_NAMES)} or a list of them (e.g. [grouped_mm, eager])",
                "an implementation"),
]


def stated_experts(fields: dict[str, object]) -> tuple[str, int] | None:
    """The field architecture fields count routed experts in, and the count; None when they state none."""
    for name in EXPERT_FIELDS:
        count = fields.get(name)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            return name, count
    return None


def dense_model_experts_problem(model: str) -> str:
    return (f"applies only to mixtures of experts, and model {model!r} has no routed experts (its config states "
            f"none of {', '.join(EXPERT_FIELDS)}): remove experts")


def experts_of(choice: ExpertsChoice | None) -> list[ExpertsName | None]:
    """Each implementation a choice measures; `[None]` (the model's default) when the spec names none."""
    if choice is None:
        return [None]
    return list(choice) if isinstance(choice, list) else [choice]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Count = Annotated[int, Field(ge=0, le=2**62)]
# Decoder layers of the largest published mixtures are below a few hundred.
MAX_MOE_LAYERS = 1024


class LayerLoad(_Frozen):
    """One mixture-of-experts layer over the measured batches: token-expert assignments per expert."""

    layer: Annotated[int, Field(ge=0, le=100_000)]
    max_tokens: Count  # the most assignments any one expert received
    mean_tokens: Annotated[float, Field(ge=0)]  # assignments / experts

    @property
    def imbalance(self) -> float:
        """The busiest expert over the mean: 1.0 is a perfectly even spread."""
        return self.max_tokens / self.mean_tokens if self.mean_tokens else 1.0


class ExpertLoad(_Frozen):
    """How the router spread a row's tokens over the experts, counted in an untimed pass over its batches.

    transformers' mixture-of-experts blocks route every token of a batch, padding included: padding costs
    expert work like any token (`padding_share` of it), which packing removes.
    """

    experts: Annotated[int, Field(ge=1, le=1_000_000)]
    top_k: Annotated[int, Field(ge=1, le=1_000_000)]
    routed_tokens: Count  # every token the layers routed (real and padding), per layer
    padding_share: Annotated[float, Field(ge=0, le=1)]  # padding's share of the routed tokens, hence of expert work
    layers: Annotated[list[LayerLoad], Field(max_length=MAX_MOE_LAYERS)]

    @property
    def max_imbalance(self) -> float:
        return max((layer.imbalance for layer in self.layers), default=1.0)

    @property
    def mean_imbalance(self) -> float:
        return sum(layer.imbalance for layer in self.layers) / len(self.layers) if self.layers else 1.0
