"""fp8 linear layers take any number of tokens: padded to the 16 float8 matmuls need, and cut back."""

from __future__ import annotations

import torch
from torch import nn

from padbench.worker.engine.model.float8 import FLOAT8_ALIGNMENT, _token_aligned


class Float8Linear(nn.Linear):
    """Stands in for torchao's class (not installed here): it refuses unaligned tokens as float8 matmuls do."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        assert (hidden.numel() // hidden.shape[-1]) % FLOAT8_ALIGNMENT == 0
        return super().forward(hidden)


def test_unaligned_tokens_are_padded_and_the_output_cut_back() -> None:
    layer = Float8Linear(32, 48)
    layer.__class__ = _token_aligned(Float8Linear)
    hidden = torch.randn(3, 7, 32, requires_grad=True)  # 21 tokens
    output = layer(hidden)
    output.sum().backward()
    assert output.shape == (3, 7, 48)
    assert torch.allclose(output, nn.functional.linear(hidden, layer.weight, layer.bias))
    assert hidden.grad is not None and hidden.grad.shape == hidden.shape
    assert layer.weight.grad is not None and torch.isfinite(layer.weight.grad).all()
