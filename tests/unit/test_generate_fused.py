"""Fused projections: the model with its query/key/value and gate/up projections fused computes the stock
model's logits, shares its memory, traces in one piece under torch.compile, and gives its modules back."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.decoding.fused import FusedPart, fused_projections, share_fused_weights
from padbench.worker.engine.model.build import build_model

CPU = torch.device("cpu")
QWEN3 = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1000,
         "max_position_embeddings": 256}
MODELS = {"tiny-llama": ModelSpec(preset="tiny-llama"), "qwen3": ModelSpec(config=QWEN3)}


def logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids).logits


@pytest.mark.parametrize("name", list(MODELS))
def test_the_fused_model_computes_the_stock_logits_on_the_same_memory(name: str) -> None:
    model = build_model(MODELS[name], torch.float32, CPU, seed=0)
    ids = torch.randint(1, 1000, (2, 9), generator=torch.Generator().manual_seed(0))
    stock = logits(model, ids)
    before = sum(p.numel() for p in model.parameters())
    shared = share_fused_weights(model)
    layers = model.config.num_hidden_layers
    assert shared.layers == 2 * layers  # each layer's attention and MLP
    assert sum(p.numel() for p in model.parameters()) == before
    attention = model.model.layers[0].self_attn
    assert attention.k_proj.weight.data_ptr() == shared.fusions[0].weight[attention.q_proj.out_features:].data_ptr()
    torch.testing.assert_close(logits(model, ids), stock, rtol=0, atol=0)  # the stock layers, on slices
    with fused_projections(model, shared):
        assert isinstance(attention.k_proj, FusedPart)
        torch.testing.assert_close(logits(model, ids), stock, rtol=1e-5, atol=1e-5)
        compiled = torch.compile(model, backend="eager", fullgraph=True)  # no break for the handed-over parts
        torch.testing.assert_close(logits(compiled, ids), stock, rtol=1e-5, atol=1e-5)
    assert all(type(getattr(attention, n)) is nn.Linear for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
    assert type(model.model.layers[0].mlp).__name__.endswith("MLP") and hasattr(model.model.layers[0].mlp, "up_proj")


def test_a_key_projection_before_its_query_fails_loudly() -> None:
    model = build_model(MODELS["qwen3"], torch.float32, CPU, seed=0)
    shared = share_fused_weights(model)
    with fused_projections(model, shared):
        attention = model.model.layers[0].self_attn
        with pytest.raises(RuntimeError, match="the fused key projection ran before its query projection"):
            attention.k_proj(torch.zeros(1, 64))
