"""Hub models on the worker, the contract's list of model types, and worker errors reported in spec words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers

from padbench.contract.kinds import parse_job_spec
from padbench.contract.model_spec import ModelSpec
from padbench.contract.model_types import CAUSAL_LM_MODEL_TYPES, TRANSFORMERS_VERSION
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model import build as model_module
from padbench.worker.engine.model.build import ModelSourceError, model_config
from padbench.worker.engine.model.support import UnsupportedModel, check_model_type
from padbench.worker.jobs.padding.job import data_with_tokenizer
from padbench.worker.runtime.isolation import describe_exception
from scripts.model_types import runnable_model_types


def test_a_hub_models_config_is_fetched_and_checked_like_a_directorys(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    fetched: list[tuple[str, str, bool]] = []

    def hf_hub_download(model_id: str, filename: str, local_files_only: bool = False) -> str:
        fetched.append((model_id, filename, local_files_only))
        return str(tmp_path / filename)

    monkeypatch.setattr(model_module, "hf_hub_download", hf_hub_download)
    built = model_config(ModelSpec(hub="org/tiny-llama"))
    assert fetched == [("org/tiny-llama", "config.json", True)]  # found in the cache: the network never asked
    assert (built.model_type, built.hidden_size, built.use_cache) == ("llama", 64, False)
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "bert"}), encoding="utf-8")
    model_module.forget_model_configs()  # as the next job starts
    with pytest.raises(UnsupportedModel, match=r"^model\.hub: model_type 'bert' is not a causal language model"):
        model_config(ModelSpec(hub="org/tiny-llama"))


def test_a_hub_model_that_cannot_be_fetched_offline_says_so_and_what_to_do() -> None:
    # The tests run with the hub offline: nothing is in the cache under this name.
    with pytest.raises(ModelSourceError) as refused:
        model_config(ModelSpec(hub="padbench-tests/no-such-model"))
    assert str(refused.value).startswith("model.hub 'padbench-tests/no-such-model': not in the Hugging Face cache, "
                                         "and HF_HUB_OFFLINE is set")
    assert "PADBENCH_MODEL_ROOTS" in str(refused.value)


def test_a_hub_model_brings_its_tokenizer() -> None:
    spec = parse_job_spec({"model": "org/name", "data": {"source": "corpus.txt"}})
    assert isinstance(spec, PaddingJobSpec) and data_with_tokenizer(spec).tokenizer == "org/name"


def test_errors_in_the_specs_words_are_reported_without_a_class_name() -> None:
    assert describe_exception(ModelSourceError("model.path 'x': no config.json there")) == \
        "model.path 'x': no config.json there"
    assert describe_exception(RuntimeError("CUDA error: unspecified launch failure")) == \
        "RuntimeError: CUDA error: unspecified launch failure"  # not the user's doing: the type helps


@pytest.mark.slow  # imports every listed family's modeling module
def test_every_model_type_the_contract_accepts_runs_on_this_transformers() -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    for model_type in sorted(CAUSAL_LM_MODEL_TYPES & set(CONFIG_MAPPING_NAMES)):
        check_model_type(model_type, "model.config")  # raises UnsupportedModel for any it cannot run


@pytest.mark.slow
def test_the_contracts_list_is_this_transformers_list() -> None:
    if transformers.__version__ != TRANSFORMERS_VERSION:
        pytest.skip(f"the list was taken from transformers {TRANSFORMERS_VERSION}, this is "
                    f"{transformers.__version__}: scripts/model_types.py takes it again")
    assert set(runnable_model_types()) == CAUSAL_LM_MODEL_TYPES


def test_rope_fields_as_published_config_files_state_them_are_taken() -> None:
    """`rope_theta` and `rope_scaling` stand in most published config.json files; transformers 5 folds them
    into `rope_parameters`, and so must a spec that states them."""
    config = model_config(ModelSpec(config={"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 1,
                                            "num_attention_heads": 4, "num_key_value_heads": 2,
                                            "intermediate_size": 128, "vocab_size": 512, "rope_theta": 1_000_000,
                                            "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    assert config.rope_parameters["rope_theta"] == 1_000_000
    assert config.rope_parameters["factor"] == 2.0
    with pytest.raises(UnsupportedModel, match="no field 'rope_thta'"):
        model_config(ModelSpec(config={"model_type": "qwen3", "rope_thta": 1_000_000}))
