"""The experts' implementations of mixture-of-experts models: the typed plugin family a spec's `experts` names.

transformers decorates a family's experts module with `use_experts_implementation`, whose forward looks up
`config._experts_implementation` at every call (https://huggingface.co/docs/transformers/main/en/experts_interface),
so one built model runs any registered implementation: switching costs nothing and needs no rebuild. Each
implementation owns the facts of where it runs; one that cannot run here is refused with the reason, never
replaced by another (transformers itself falls back from `grouped_mm` to a Python loop without saying so).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import torch
import transformers
from transformers import PretrainedConfig

from padbench.contract.experts import EXPERT_FIELDS, EXPERTS_NAMES, stated_experts
from padbench.contract.registry import Registry
from padbench.worker.runtime.isolation import SpecProblem


class ExpertsUnavailable(SpecProblem):
    """An experts' implementation that cannot run here; the message names it and why."""


@dataclass(frozen=True)
class ExpertsImplementation:
    name: str  # transformers' name for it, as a spec writes it and a row records it
    unavailable_reason: Callable[[torch.device], str | None]


EXPERTS_IMPLEMENTATIONS: Registry[ExpertsImplementation] = Registry("experts implementation")


def _registered_in_transformers(name: str) -> str | None:
    """`eager` is the experts module's own forward; the others must be in transformers' experts interface."""
    if name == "eager":
        return None
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return f"transformers {transformers.__version__} has no experts interface"
    if name not in ALL_EXPERTS_FUNCTIONS:
        return f"transformers {transformers.__version__} has no experts implementation {name!r}"
    return None


def _always(name: str) -> Callable[[torch.device], str | None]:
    return lambda device: _registered_in_transformers(name)


def _grouped_mm_reason(device: torch.device) -> str | None:
    """torch's grouped matmul must exist for the device: transformers otherwise runs a per-expert Python loop
    under the name `grouped_mm`, which would be measured as what it is not."""
    missing = _registered_in_transformers("grouped_mm")
    if missing is not None:
        return missing
    has_public, has_private = hasattr(torch.nn.functional, "grouped_mm"), hasattr(torch, "_grouped_mm")
    if not (has_public or has_private):
        return f"torch {torch.__version__} has no grouped matmul (torch.nn.functional.grouped_mm, torch._grouped_mm)"
    version = torch.torch_version.TorchVersion(torch.__version__)
    if device.type == "cpu" and version < "2.11":
        return f"torch {torch.__version__} has no grouped matmul for CPUs that transformers uses (torch 2.11 or later)"
    if device.type == "cuda":
        capability = torch.cuda.get_device_capability(device)
        if (has_public or version >= "2.9") and capability < (8, 0):
            return f"torch's grouped matmul needs a GPU of compute capability 8.0 or later, not {capability}"
        if not (has_public or version >= "2.9") and capability[0] != 9:
            return f"torch {torch.__version__}'s grouped matmul runs on Hopper GPUs only (compute capability 9.x)"
    return None


for _name in ("eager", "batched_mm"):
    EXPERTS_IMPLEMENTATIONS.add(_name, ExpertsImplementation(_name, _always(_name)))
EXPERTS_IMPLEMENTATIONS.add("grouped_mm", ExpertsImplementation("grouped_mm", _grouped_mm_reason))
if set(EXPERTS_IMPLEMENTATIONS) != set(EXPERTS_NAMES):  # the contract's Literal is what specs may write
    raise RuntimeError("the contract and the registry name different experts implementations")


def expert_field(config: PretrainedConfig) -> tuple[str, int] | None:
    """The field the config counts its routed experts in, as the user wrote it, and the count; None for a
    dense model."""
    return stated_experts({name: getattr(config, name, None) for name in EXPERT_FIELDS})


def is_mixture_of_experts(config: PretrainedConfig) -> bool:
    return expert_field(config) is not None


def uses_experts_interface(model_class: type) -> bool:
    """Whether the class's experts go through transformers' experts interface (so an implementation can be
    chosen, and padbench counts their FLOPs): transformers' own test of it, where this version has one."""
    can_set = getattr(model_class, "_can_set_experts_implementation", None)
    return bool(can_set()) if callable(can_set) else False


def experts_implementation(model: torch.nn.Module) -> str | None:
    """The experts' implementation the model runs now; None for a dense model."""
    config = cast(PretrainedConfig, model.config)
    return str(config._experts_implementation) if is_mixture_of_experts(config) else None


def use_experts(model: torch.nn.Module, name: str | None, device: torch.device,
                default: str | None = None) -> str | None:
    """Switch the model's experts to `name` and return what will run; None for a dense model. Without a name,
    the model's default: `default` (what transformers chose when the model was built), else what is set now.
    An implementation that cannot run here raises ExpertsUnavailable."""
    chosen = name or default or experts_implementation(model)
    if chosen is None:
        return None
    reason = EXPERTS_IMPLEMENTATIONS.get(chosen).unavailable_reason(device)
    if reason is not None:
        whose = f"experts {chosen!r}" if name else f"experts: transformers' default {chosen!r}"
        hint = "" if name else "; name one that can (experts: eager)"
        raise ExpertsUnavailable(f"{whose} cannot run on {device}: {reason}{hint}")
    if chosen != experts_implementation(model):
        switch = getattr(model, "set_experts_implementation", None)
        if switch is None:  # an older transformers: only what the model was built with runs
            raise ExpertsUnavailable(f"experts {chosen!r}: transformers {transformers.__version__} cannot switch a "
                                     "built model's experts (no set_experts_implementation)")
        switch(chosen)
    return chosen


@contextlib.contextmanager
def experts_as(model: torch.nn.Module, name: str) -> Iterator[None]:
    """Run a mixture's experts as `name` for the duration (nothing for a dense model), then as before."""
    previous = experts_implementation(model)
    if previous is None or previous == name:
        yield
        return
    model.set_experts_implementation(name)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_experts_implementation(previous)  # type: ignore[operator]


def top_k(config: PretrainedConfig) -> int:
    """Experts each token is routed to: `num_experts_per_tok` in every family transformers ships."""
    return int(config.num_experts_per_tok)


def _stacked(module: torch.nn.Module, experts: int) -> list[torch.Tensor]:
    """The module's own parameters stacked over the experts (a leading dimension of `experts`)."""
    return [parameter for parameter in module.parameters(recurse=False)
            if parameter.dim() >= 2 and parameter.shape[0] == experts]


def experts_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Every experts module (one per mixture-of-experts layer, in layer order): the module holding the routed
    experts' weights as tensors stacked over the experts, as transformers' experts interface wants them."""
    found = []
    for module in model.modules():
        experts = getattr(module, "num_experts", None)
        matrices = [p for p in _stacked(module, experts) if p.dim() == 3] if isinstance(experts, int) else []
        if matrices:
            found.append(module)
    return found


def routed_macs_per_token(model: torch.nn.Module) -> int:
    """Multiply-accumulates of the routed experts per token: each of its top-k experts' matrices once
    (biases are additions, not matmuls: counted nowhere, as for linear layers)."""
    config = cast(PretrainedConfig, model.config)
    total = 0
    for module in experts_modules(model):
        experts = int(module.num_experts)  # type: ignore[arg-type]
        total += sum(p.numel() for p in _stacked(module, experts) if p.dim() == 3) // experts
    return top_k(config) * total if total else 0


def router_macs_per_token(model: torch.nn.Module) -> int:
    """The routers' scores: one multiply-accumulate per router weight (experts × width) per token."""
    total = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        routes = all(isinstance(getattr(module, name, None), int) for name in ("top_k", "num_experts"))
        if routes and isinstance(weight, torch.Tensor) and weight.dim() == 2:
            total += weight.numel()
    return total


def inactive_parameters(model: torch.nn.Module) -> int:
    """Parameters a token does not go through: the routed experts it is not sent to ((E − k)/E of them)."""
    config = cast(PretrainedConfig, model.config)
    total = 0
    for module in experts_modules(model):
        experts = int(module.num_experts)  # type: ignore[arg-type]
        stacked = sum(p.numel() for p in _stacked(module, experts))
        total += stacked * (experts - top_k(config)) // experts
    return total
