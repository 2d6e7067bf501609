"""How a mixture of experts' routers spread a row's tokens over the experts, counted in an untimed pass.

A forward pre-hook on each experts module reads the top-k expert indices the router hands it (transformers'
experts interface calls every implementation with `(hidden_states, top_k_index, top_k_weights)`) and adds a
bincount per layer on the device; nothing leaves the device until the pass ends. The pass runs each of the
row's batches once, without gradients, before the timed steps: the hooks are never attached while anything is
timed.

Padding: transformers' mixture-of-experts blocks flatten the whole (rows × width) batch and route every
position, padding included (e.g. `MixtralSparseMoeBlock.forward`), so padding costs expert work like a real
token. The pass counts what the routers actually received, so padding's share is measured, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from transformers import PretrainedConfig

from padbench.contract.experts import ExpertLoad, LayerLoad
from padbench.worker.engine.data.batches import Batch
from padbench.worker.engine.model.experts import experts_modules, top_k
from padbench.worker.engine.parallel.ranks import ONE_RANK, Ranks

ForwardFn = Callable[[torch.nn.Module, Batch], Any]


def _counting_hook(counts: torch.Tensor, experts: int) -> Callable[..., None]:
    def hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        indices = args[1] if len(args) > 1 else kwargs["top_k_index"]
        # An index equal to the number of experts marks a slot no local expert takes (expert parallelism).
        counts.add_(torch.bincount(indices.reshape(-1), minlength=experts + 1)[:experts])

    return hook


def count_expert_load(model: torch.nn.Module, forward: ForwardFn, batches: Sequence[Batch],
                      ranks: Ranks = ONE_RANK) -> ExpertLoad | None:
    """The routers' assignments over `batches` (every rank's, summed); None for a dense model."""
    modules = experts_modules(model)
    if not modules:
        return None
    experts = int(cast(int, modules[0].num_experts))
    device = next(modules[0].parameters()).device
    counts = [torch.zeros(experts, dtype=torch.long, device=device) for _ in modules]
    handles = [module.register_forward_pre_hook(_counting_hook(layer_counts, experts), with_kwargs=True)
               for module, layer_counts in zip(modules, counts, strict=True)]
    try:
        with torch.no_grad():
            for batch in batches:
                forward(model, batch)
    finally:
        for handle in handles:
            handle.remove()
    per_layer = [torch.tensor(column).sum(dim=0).tolist()  # each layer's counts summed over the ranks
                 for column in zip(*ranks.gather([layer.tolist() for layer in counts]), strict=True)]
    real = sum(ranks.gather(sum(batch.real_tokens for batch in batches)))
    return summarize_load(per_layer, top_k(cast(PretrainedConfig, model.config)), real)


def summarize_load(per_layer: list[list[int]], k: int, real_tokens: int) -> ExpertLoad:
    """Max and mean assignments per expert in each layer; padding's share of what the routers received."""
    experts = len(per_layer[0])
    routed = sum(per_layer[0]) // k  # every token is routed to k experts in every layer
    layers = [LayerLoad(layer=index, max_tokens=max(counts), mean_tokens=sum(counts) / experts)
              for index, counts in enumerate(per_layer)]
    padding_share = max(0.0, 1 - real_tokens / routed) if routed else 0.0
    return ExpertLoad(experts=experts, top_k=k, routed_tokens=routed, padding_share=padding_share, layers=layers)
