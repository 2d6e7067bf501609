"""build_model: presets, explicit fields, local directories; seeded (or fast on-device init), dropout-free, eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from padbench.contract.spec import GPT2Fields, ModelSpec
from padbench.worker.engine.model import ModelSourceError, build_model, model_config, model_max_positions
from padbench.worker.runtime.device import torch_dtype

CPU = torch.device("cpu")
SMALL = GPT2Fields(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=64)


def test_presets_have_the_documented_shapes() -> None:
    seed = model_config(ModelSpec(preset="gpt2-seed"))
    assert (seed.n_layer, seed.n_embd, seed.n_head, seed.vocab_size) == (12, 1024, 8, 30522)
    assert seed.n_positions >= 640
    gpt2 = model_config(ModelSpec(preset="gpt2"))
    assert (gpt2.n_layer, gpt2.n_embd, gpt2.n_head, gpt2.vocab_size) == (12, 768, 12, 50257)


def test_tiny_preset_builds_in_eval_mode_without_dropout() -> None:
    model = build_model(ModelSpec(preset="tiny"), torch.bfloat16, CPU, seed=0)
    assert isinstance(model, GPT2LMHeadModel)
    assert not model.training
    assert next(model.parameters()).dtype == torch.bfloat16
    assert (model.config.resid_pdrop, model.config.embd_pdrop, model.config.attn_pdrop) == (0.0, 0.0, 0.0)
    assert all(module.p == 0.0 for module in model.modules() if isinstance(module, torch.nn.Dropout))


def test_random_init_is_seeded() -> None:
    spec = ModelSpec(config=SMALL)
    first, again = (build_model(spec, torch.float32, CPU, seed=7) for _ in range(2))
    other = build_model(spec, torch.float32, CPU, seed=8)
    assert torch.equal(first.transformer.wte.weight, again.transformer.wte.weight)
    assert not torch.equal(first.transformer.wte.weight, other.transformer.wte.weight)


def test_explicit_fields_build_that_shape() -> None:
    model = build_model(ModelSpec(config=SMALL), torch.float32, CPU, seed=0)
    assert model.transformer.wpe.weight.shape == (64, 32)
    assert model.lm_head.weight.shape == (100, 32)
    assert model_max_positions(ModelSpec(config=SMALL)) == 64


def save_small_directory(directory: Path, *, weights: bool) -> GPT2LMHeadModel:
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=48, resid_pdrop=0.1)
    model = GPT2LMHeadModel(config)
    if weights:
        model.save_pretrained(directory)
    else:
        config.save_pretrained(directory)
    return model


def test_local_directory_config_random_init(tmp_path: Path) -> None:
    save_small_directory(tmp_path, weights=False)
    spec = ModelSpec(path=str(tmp_path))
    model = build_model(spec, torch.float32, CPU, seed=0)
    assert model.transformer.wpe.weight.shape == (48, 32)
    assert model.config.resid_pdrop == 0.0
    assert model_max_positions(spec) == 48


def test_local_directory_loads_weights_when_asked(tmp_path: Path) -> None:
    saved = save_small_directory(tmp_path, weights=True)
    model = build_model(ModelSpec(path=str(tmp_path), load_weights=True), torch.float32, CPU, seed=0)
    assert torch.equal(model.transformer.h[0].mlp.c_fc.weight, saved.transformer.h[0].mlp.c_fc.weight)
    assert all(module.p == 0.0 for module in model.modules() if isinstance(module, torch.nn.Dropout))


def test_directory_without_config_json_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match=r"model\.path .*no config\.json"):
        model_max_positions(ModelSpec(path=str(tmp_path)))


def test_directory_of_another_architecture_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(ModelSourceError, match="model_type is 'llama'"):
        build_model(ModelSpec(path=str(tmp_path)), torch.float32, CPU, seed=0)


def test_missing_weights_are_a_clear_error(tmp_path: Path) -> None:
    save_small_directory(tmp_path, weights=False)
    with pytest.raises(ModelSourceError, match="cannot load weights"):
        build_model(ModelSpec(path=str(tmp_path), load_weights=True), torch.float32, CPU, seed=0)


def test_gelu_new_runs_as_the_same_function_fused() -> None:
    model = build_model(ModelSpec(config=SMALL), torch.float32, CPU, seed=0)
    assert model.config.activation_function == "gelu_pytorch_tanh"
    x = torch.linspace(-6, 6, 1001)
    written_out = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    assert torch.allclose(model.transformer.h[0].mlp.act(x), written_out, atol=1e-6)


def test_torch_dtype_names() -> None:
    assert [torch_dtype(name) for name in ("bf16", "fp16", "fp32")] == [torch.bfloat16, torch.float16, torch.float32]


def test_on_device_init_builds_the_same_model_without_the_seed() -> None:
    spec = ModelSpec(config=SMALL)
    seeded = build_model(spec, torch.bfloat16, CPU, seed=0)
    fast = build_model(spec, torch.bfloat16, CPU, seed=0, init="on_device")
    shapes = {name: (p.shape, p.dtype, p.device) for name, p in seeded.named_parameters()}
    assert {name: (p.shape, p.dtype, p.device) for name, p in fast.named_parameters()} == shapes
    assert fast.lm_head.weight is fast.transformer.wte.weight  # tied: the same memory as the measured model
    assert not fast.training and torch.isfinite(fast.transformer.h[0].mlp.c_fc.weight).all()
