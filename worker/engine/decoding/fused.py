"""Fused projections: each attention layer's query, key and value projections as one matmul, and each gated
MLP's gate and up projections as one.

A decode step multiplies a few dozen rows by every weight matrix: each matmul is bound by reading its weight,
and a small one (a key projection is 4 MB in Qwen3-1.7B) leaves most of the GPU's memory bandwidth idle. One
matmul over the concatenated weight reads the same bytes with one launch and better use of the bandwidth.

`share_fused_weights` concatenates the weights once, when the model is built, and points the model's own
linear layers at row slices of the concatenation (views, no copy): the stock model still runs as before,
unchanged, on the same memory. `fused_projections(model)` swaps fused modules in for as long as it is held:
- an MLP with `gate_proj`, `up_proj`, `down_proj` and `act_fn` becomes `down(act(gate) * up)` with gate and up
  cut from one matmul (the form of Llama, Mistral, Qwen 2 and 3, Gemma);
- an attention layer's `q_proj` computes all three projections and hands the key and value parts to
  `k_proj` and `v_proj`, which return them: transformers' attention layers call the three in that order, on
  the same input. One called out of that order fails loudly, never silently reuses a stale part.
Every product of the fused modules, the attention output projection's included, goes through the model's
`DecodeProducts`, which run a decode step's products split-K where tuning found that faster (`split_k`).
Whether the fused model computes what the stock one does is for the correctness gate to say: its reference
runs the stock model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from padbench.worker.engine.decoding.split_k import DecodeProducts

QKV = ("q_proj", "k_proj", "v_proj")
GATE_UP = ("gate_proj", "up_proj")


@dataclass
class _Fusion:
    parent: nn.Module  # the attention layer or the MLP
    names: tuple[str, ...]  # its linear layers, in the concatenation's order
    weight: torch.Tensor
    bias: torch.Tensor | None

    @property
    def widths(self) -> list[int]:
        return [int(getattr(self.parent, name).out_features) for name in self.names]


def _fusable(module: nn.Module, names: tuple[str, ...]) -> bool:
    layers = [getattr(module, name, None) for name in names]
    if not all(type(layer) is nn.Linear for layer in layers):
        return False
    linears = [layer for layer in layers if isinstance(layer, nn.Linear)]
    return len({(layer.in_features, layer.bias is None, layer.weight.dtype) for layer in linears}) == 1


def _concatenate(module: nn.Module, names: tuple[str, ...]) -> _Fusion:
    """One weight (and bias) for the named linear layers, which keep row slices of it as their own."""
    layers: list[nn.Linear] = [getattr(module, name) for name in names]
    weight = torch.cat([layer.weight.detach() for layer in layers])
    bias = torch.cat([layer.bias.detach() for layer in layers]) if layers[0].bias is not None else None
    start = 0
    for layer in layers:
        rows = slice(start, start + layer.out_features)
        layer.weight = nn.Parameter(weight[rows], requires_grad=False)
        if bias is not None:
            layer.bias = nn.Parameter(bias[rows], requires_grad=False)
        start += layer.out_features
    return _Fusion(module, names, weight, bias)


@dataclass(frozen=True)
class SharedWeights:
    """The concatenated weights of a model's fusable layers (empty when none are), and how their products run."""

    fusions: tuple[_Fusion, ...]
    products: DecodeProducts = field(default_factory=DecodeProducts)

    @property
    def layers(self) -> int:
        return len(self.fusions)

    def product_weights(self) -> dict[tuple[int, int], list[torch.Tensor]]:
        """Every weight the fused modules multiply by, grouped by shape: what `DecodeProducts.tune` times."""
        shapes: dict[tuple[int, int], list[torch.Tensor]] = {}
        for fusion in self.fusions:
            output = _output_projection(fusion)
            for weight in (fusion.weight, *([output.weight] if output is not None else [])):
                shapes.setdefault((weight.shape[0], weight.shape[1]), []).append(weight)
        return shapes


def _output_projection(fusion: _Fusion) -> nn.Linear | None:
    """The layer after a fusion's product: an attention layer's `o_proj`, an MLP's `down_proj`."""
    layer = getattr(fusion.parent, "o_proj" if fusion.names == QKV else "down_proj", None)
    if isinstance(layer, ProductLinear):  # inside `fused_projections`
        layer = layer.layer
    return layer if type(layer) is nn.Linear else None


def share_fused_weights(model: nn.Module) -> SharedWeights:
    fusions = []
    with torch.no_grad():
        for module in list(model.modules()):
            if _fusable(module, QKV):
                fusions.append(_concatenate(module, QKV))
            elif _fusable(module, GATE_UP) and isinstance(getattr(module, "down_proj", None), nn.Linear) \
                    and callable(getattr(module, "act_fn", None)):
                fusions.append(_concatenate(module, GATE_UP))
    return SharedWeights(tuple(fusions))


class _Parts:
    """The key and value parts of the last fused query projection, until k_proj and v_proj take them."""

    def __init__(self) -> None:
        self.key: torch.Tensor | None = None
        self.value: torch.Tensor | None = None


class FusedQuery(nn.Module):
    def __init__(self, fusion: _Fusion, parts: _Parts, products: DecodeProducts) -> None:
        super().__init__()
        self.weight, self.bias, self.widths, self.parts = fusion.weight, fusion.bias, fusion.widths, parts
        self.products = products

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused = self.products.linear(x, self.weight, self.bias)
        query, self.parts.key, self.parts.value = fused.split(self.widths, dim=-1)
        return query


class ProductLinear(nn.Module):
    """A stock linear layer whose product goes through `DecodeProducts` (same weight, same bias)."""

    def __init__(self, layer: nn.Linear, products: DecodeProducts) -> None:
        super().__init__()
        self.layer, self.products = layer, products

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.products.linear(x, self.layer.weight, self.layer.bias)


class FusedPart(nn.Module):
    def __init__(self, parts: _Parts, name: str) -> None:
        super().__init__()
        self.parts, self.name = parts, name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        part = getattr(self.parts, self.name)
        if part is None:
            raise RuntimeError(f"the fused {self.name} projection ran before its query projection")
        setattr(self.parts, self.name, None)
        return part


class FusedGatedMLP(nn.Module):
    def __init__(self, fusion: _Fusion, products: DecodeProducts) -> None:
        super().__init__()
        mlp = fusion.parent
        self.weight, self.bias, self.widths, self.products = fusion.weight, fusion.bias, fusion.widths, products
        down = _output_projection(fusion)
        self.down_proj: nn.Module = ProductLinear(down, products) if down is not None else mlp.down_proj  # type: ignore[assignment]
        self.act_fn: Callable[[torch.Tensor], torch.Tensor] = mlp.act_fn  # type: ignore[assignment]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.products.linear(x, self.weight, self.bias).split(self.widths, dim=-1)
        return self.down_proj(self.act_fn(gate) * up)


def _owner(model: nn.Module, target: nn.Module) -> tuple[nn.Module, str]:
    for module in model.modules():
        for name, child in module.named_children():
            if child is target:
                return module, name
    raise LookupError("the fused MLP is no longer part of the model")


@contextmanager
def fused_projections(model: nn.Module, shared: SharedWeights) -> Iterator[None]:
    """The model with its fusable projections fused, restored to its own modules on exit."""
    restore: list[tuple[nn.Module, str, nn.Module]] = []
    try:
        for fusion in shared.fusions:
            if fusion.names == QKV:
                parts = _Parts()
                replacements: dict[str, nn.Module] = {
                    "q_proj": FusedQuery(fusion, parts, shared.products), "k_proj": FusedPart(parts, "key"),
                    "v_proj": FusedPart(parts, "value")}
                output = _output_projection(fusion)
                if output is not None:
                    replacements["o_proj"] = ProductLinear(output, shared.products)
                for name, module in replacements.items():
                    restore.append((fusion.parent, name, getattr(fusion.parent, name)))
                    setattr(fusion.parent, name, module)
            else:
                owner, name = _owner(model, fusion.parent)
                restore.append((owner, name, fusion.parent))
                setattr(owner, name, FusedGatedMLP(fusion, shared.products))
        yield
    finally:
        for owner, name, module in reversed(restore):
            setattr(owner, name, module)
