"""build_model: presets, explicit fields, local directories of any causal LM; seeded (or fast on-device init),
dropout-free, eval; model types that cannot run are refused before anything heavy is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.model.build import ModelSourceError, build_model, model_config, model_max_positions
from padbench.worker.engine.model.support import UnsupportedModel
from padbench.worker.runtime.device import torch_dtype

CPU = torch.device("cpu")
SMALL = {"model_type": "gpt2", "n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 100, "n_positions": 64}


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


def test_directory_of_any_causal_lm_builds_that_model(tmp_path: Path) -> None:
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=100, max_position_embeddings=96)
    config.save_pretrained(tmp_path)
    spec = ModelSpec(path=str(tmp_path))
    model = build_model(spec, torch.float32, CPU, seed=0)
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.num_key_value_heads == 2
    assert model_max_positions(spec) == 96


@pytest.mark.parametrize(("config", "reason"), [
    ({"model_type": "bert"}, "not a causal language model"),
    ({"model_type": "falcon"}, "not through transformers' attention interface"),
    # A mixture whose experts bypass transformers' experts interface, named by the field its config counts them in.
    ({"model_type": "jetmoe", "num_local_experts": 4},
     r"mixture of experts \(num_local_experts=4\).*experts interface"),
    ({"model_type": "not-a-model"}, "not known to transformers"),
])
def test_model_types_that_cannot_run_are_refused_naming_field_type_and_why(
        config: dict[str, object], reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Refused before any weight exists: constructing a model here would fail the test.
    monkeypatch.setattr("padbench.worker.engine.model.build._instantiate", lambda *args: pytest.fail("built a model"))
    with pytest.raises(UnsupportedModel, match=rf"model\.config: .*{config['model_type']}.*{reason}"):
        build_model(ModelSpec(config=config), torch.float32, CPU, seed=0)


def test_directory_of_an_encoder_is_refused_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(UnsupportedModel, match=r"model\.path: model_type 'bert' is not a causal language model"):
        build_model(ModelSpec(path=str(tmp_path)), torch.float32, CPU, seed=0)


def test_a_misspelt_config_field_is_an_error_naming_it() -> None:
    config = {"model_type": "llama", "hidden_size": 32, "num_key_value_head": 2}
    with pytest.raises(UnsupportedModel, match=r"no field .num_key_value_head. .*did you mean .num_key_value_heads."):
        model_config(ModelSpec(config=config))


def test_fields_the_config_class_rejects_are_a_clear_error() -> None:
    with pytest.raises(ModelSourceError, match=r"model\.config: the llama config rejects these fields: .*multiple"):
        model_config(ModelSpec(config={"model_type": "llama", "hidden_size": 65, "num_attention_heads": 4}))


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
