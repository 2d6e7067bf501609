"""Image-and-text wrappers of text models (Gemma 3's `gemma3`) run their text model."""

from __future__ import annotations

import pytest
import torch

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.model.build import ModelSourceError, build_model, model_config, text_model_config

CPU = torch.device("cpu")
TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 256}
GEMMA3 = ModelSpec(config={"model_type": "gemma3", "text_config": TEXT})


def test_a_gemma3_config_builds_its_text_model() -> None:
    config = model_config(GEMMA3)
    assert config.model_type == "gemma3_text" and config.vocab_size == 512
    model = build_model(GEMMA3, torch.float32, CPU, seed=0)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    logits = model(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert logits.shape == (1, 3, 512)


def test_loading_a_wrappers_checkpoint_is_refused_with_the_reason() -> None:
    from transformers import Gemma3Config

    loading = GEMMA3.model_copy(update={"load_weights": True})  # as a model.path with load_weights would ask
    with pytest.raises(ModelSourceError, match=r"image-and-text model.*gemma3_text"):
        text_model_config(Gemma3Config(text_config=TEXT), loading, "model.path")
