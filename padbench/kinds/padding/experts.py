"""Mixtures of experts in padding reports: the implementation each row ran, the parameters a token goes
through, and how the routers spread the work (each layer's busiest expert over the mean, padding's share).

A dense model's result has none of these: every function here then adds nothing, so its report is unchanged.
"""

from __future__ import annotations

from typing import Any

from padbench.contract.experts import ExpertLoad
from padbench.kinds.padding.contract import PaddingResult, StrategyResult


def kernel_cell(row: StrategyResult) -> str:
    """The kernel as tables name it, with how grouped-query attention ran and the experts' implementation."""
    kernel = f"{row.kernel} (K/V expanded)" if row.gqa == "expanded" else row.kernel
    return f"{kernel} · experts {row.experts}" if row.experts else kernel


def compare_kernel(row: StrategyResult) -> str:
    """The kernel half of a compare key: rows of two experts' implementations are two rows."""
    return f"{row.kernel} · {row.experts}" if row.experts else row.kernel


# What a mixture's training step leaves out, said beside its figures.
AUX_LOSS_NOTE = ("training loss: next-token cross-entropy alone, without the routers' load-balancing loss "
                 "(transformers adds it only with output_router_logits; a softmax over each router's scores, "
                 "a negligible share of a step)")


def active_line(result: PaddingResult) -> list[str]:
    active = result.active_parameters
    if active is None:
        return []
    lines = [f"mixture of experts: {active / 1e6:,.1f}M of the {result.model_parameters / 1e6:,.1f}M parameters "
             f"active per token ({active / result.model_parameters:.0%}: its top-k routed experts and every "
             "parameter outside the experts); FLOPs and MFU count the active ones"]
    return lines + ([AUX_LOSS_NOTE] if result.spec.mode == "training" else [])


def load_lines(result: PaddingResult) -> list[str]:
    """Per row: the busiest expert over the mean (worst layer, mean over layers) and padding's routed share."""
    rows = [row for row in result.strategies if row.expert_load is not None]
    if not rows:
        return []
    first = rows[0].expert_load
    assert first is not None
    lines = [f"expert load (top-{first.top_k} of {first.experts} experts, every token routed in an untimed pass over "
             "the row's batches; padding tokens are routed like real ones and cost expert work, which packing "
             "removes):"]
    for row in rows:
        load = row.expert_load
        assert load is not None
        lines.append(f"  {row.label} / {kernel_cell(row)}: {load_summary(load)}")
    return lines


def load_summary(load: ExpertLoad) -> str:
    worst = max(load.layers, key=lambda layer: layer.imbalance)
    return (f"busiest expert {load.max_imbalance:.2f}× the mean (layer {worst.layer}; {load.mean_imbalance:.2f}× over "
            f"the layers), padding tokens routed: {load.padding_share:.0%} of expert work")


def load_fields(row: StrategyResult) -> dict[str, Any]:
    """CSV columns of a row's expert load (empty cells for a dense model)."""
    load = row.expert_load
    return {"experts": row.experts,
            "routed_tokens": load.routed_tokens if load else None,
            "expert_max_imbalance": load.max_imbalance if load else None,
            "expert_mean_imbalance": load.mean_imbalance if load else None,
            "expert_padding_share": load.padding_share if load else None}
