"""What a spec can get wrong is refused when it is read, in the user's words: the nearest preset, model type
or key, and no validator labels, class names or kind tags the user did not write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.specfile import SpecError, check_new_job
from tests.unit.test_report_padding import sample_result

# (spec document, the message the CLI prints for it)
REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"model": {"preset": "llama3"}}, "model.preset: 'llama3' is not one of 'tiny', 'gpt2', "),
    ({"model": {"preset": "llama3"}}, "or 'tiny-gpt-oss' (did you mean 'llama-3.2-1b'?)"),
    ({"attention": "flash_attn"}, "attention: 'flash_attn' is not one of 'auto', 'flash', "),
    ({"model": "llama3"}, "model: 'llama3' is not a preset (did you mean 'llama-3.2-1b'?); write a local model "
                          "directory as a path (./llama3) and a Hugging Face Hub model as org/name or hub:llama3"),
    ({"model": "gpt-2"}, "model: 'gpt-2' is not a preset (did you mean 'gpt2'?)"),
    ({"model": {"config": {"model_type": "lama", "hidden_size": 64}}},
     "model.config: model_type 'lama' is not one padbench measures (did you mean 'llama'?)"),
    ({"model": {"config": {"model_type": "bert"}}}, "model.config: model_type 'bert' is not one padbench measures: "
                                                    "it measures decoder-only causal LMs"),
    ({"model": "hf:meta-llama/Llama-3.2-1B"}, "model: write a Hugging Face Hub model as org/name or hub:NAME"),
    ({"model": {"hub": "a/b/c"}}, "model.hub: a Hugging Face Hub model ID is org/name"),
    ({"device": "cpu", "batch_size": "auto"}, "batch_size: auto on device cpu needs probe.cpu_memory_budget_bytes"),
    ({"device": "cpu", "dtype": "fp32", "attention": "sdpa",
      "strategies": [{"name": "packed", "batch_size": [8, "auto"]}]},
     "batch_size: auto on device cpu needs probe.cpu_memory_budget_bytes"),
    ({"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa", "batch_size": "auto"},
     "batch_size: auto on device cpu needs probe.cpu_memory_budget_bytes"),
    ({"kind": "generate", "model": {"config": {"model_type": "lama", "hidden_size": 64}}},
     "model.config: model_type 'lama' is not one padbench measures (did you mean 'llama'?)"),
    ({"repeats": 3}, "repeats: unknown key (did you mean 'measurement.repeats'?)"),
    ({"model": "tiny-llama", "experts": "eager"},
     "experts: applies only to mixtures of experts, and model 'tiny-llama' has no routed experts"),
    ({"model": "tiny-olmoe", "experts": ["eager", "megablocks"]},
     "experts: must be one of eager, batched_mm, grouped_mm or a list of them"),
    ({"max_length": 64}, "max_length: unknown key (did you mean 'data.max_length'?)"),
    ({"data": {"max_lenght": 64}}, "data.max_lenght: unknown key (did you mean 'max_length'?)"),
    ({"strategies": [{"name": "static", "attn": "sdpa"}]},
     "strategies.0.attn: unknown key (did you mean 'attention'?)"),
    ({"kind": "attention", "repeat": 3}, "repeat: unknown key (did you mean 'repeats'?)"),
    ({"dtype": "fp32", "attention": "flash"}, "attention 'flash' (static) needs dtype bf16 or fp16, not fp32"),
]
NOT_THE_USERS_WORDS = ("Value error", "Assertion failed", "padding.", "Extra inputs", "Error:")


def refusal(document: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as refused:
        check_new_job(document, "my.yaml")
    return str(refused.value)


@pytest.mark.parametrize(("document", "message"), REFUSALS)
def test_each_mistake_is_named_in_the_users_words(document: dict[str, Any], message: str) -> None:
    text = refusal(document)
    assert text.startswith("my.yaml: ") and message in text
    assert not any(words in text for words in NOT_THE_USERS_WORDS), text


def test_the_run_command_prints_the_same_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "my.yaml"
    spec.write_text("repeats: 3\nmodel: llama3\n", encoding="utf-8")
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "repeats: unknown key (did you mean 'measurement.repeats'?)" in err
    assert "model: 'llama3' is not a preset (did you mean 'llama-3.2-1b'?)" in err


@pytest.mark.parametrize(("written", "meaning"), [
    ("gpt2", {"preset": "gpt2"}),  # a preset name is the preset, never the Hub's model of that name
    ("hub:gpt2", {"hub": "gpt2"}),
    ("openai-community/gpt2", {"hub": "openai-community/gpt2"}),
    ("./gpt2", {"path": "./gpt2"}),
    ("/models/llama", {"path": "/models/llama"}),
    ("~/models/llama", {"path": "~/models/llama"}),
    ("models/llama/v2", {"path": "models/llama/v2"}),  # deeper than org/name: a directory
])
def test_a_model_string_means_one_thing_by_its_form(written: str, meaning: dict[str, str]) -> None:
    spec = parse_job_spec({"model": written})
    assert isinstance(spec, PaddingJobSpec)
    assert spec.model.model_dump(exclude_defaults=True) == meaning


def test_hub_models_are_labelled_apart_from_presets_and_bring_their_tokenizer() -> None:
    spec = parse_job_spec({"model": "hub:gpt2", "data": {"source": "corpus.txt"}})
    assert isinstance(spec, PaddingJobSpec) and spec.model.label == "hub:gpt2"
    assert spec.model.architecture() is None  # the worker reads its config.json


def test_hub_models_load_no_weights() -> None:
    assert "load_weights needs a local model directory" in refusal({"model": {"hub": "org/name",
                                                                              "load_weights": True}})


@pytest.mark.parametrize(("transformers_name", "kernel"), [
    ("flash_attention_2", "flash-attn"), ("sdpa", "sdpa"), ("flex_attention", "flex"), ("eager", "eager"),
    # FlashAttention-3 is flash_attn_interface (flash-attn's hopper build), FlashAttention-4 flash_attn.cute:
    # each is its own kernel, never FlashAttention-2.
    ("flash_attention_3", "flash-attn-3"), ("flash_attention_4", "flash-attn-cute"),
])
def test_transformers_attention_names_are_stored_as_the_kernel_they_run(transformers_name: str,
                                                                        kernel: str) -> None:
    spec = parse_job_spec({"attention": transformers_name,
                           "strategies": ["static", {"name": "packed", "attention": transformers_name}]})
    assert isinstance(spec, PaddingJobSpec)
    assert spec.attention == kernel and spec.strategies[1].attention == kernel
    assert spec.model_dump(mode="json")["attention"] == kernel


def test_attention_sweeps_take_transformers_names_too() -> None:
    sweep = parse_job_spec({"kind": "attention", "kernels": ["eager", "flash_attention_2", "flash_attention_3",
                                                             "flash_attention_4", "flex_attention"]})
    assert isinstance(sweep, AttentionJobSpec)
    assert sweep.kernels == ["naive", "flash-attn", "flash-attn-3", "flash-attn-cute", "flex"]


def test_a_cpu_probe_with_a_memory_budget_is_accepted() -> None:
    spec = parse_job_spec({"device": "cpu", "batch_size": "auto", "dtype": "fp32", "attention": "sdpa",
                           "probe": {"cpu_memory_budget_bytes": 2**30}})
    assert isinstance(spec, PaddingJobSpec) and spec.batch_size == "auto"
    assert parse_job_spec({"device": "auto", "batch_size": "auto"}).kind == "padding"  # a GPU may run it


def test_a_stored_result_stays_readable_though_a_new_job_may_not_ask_the_same() -> None:
    """Checks that came after a job ran refuse new jobs only: its result still reads back."""
    result = sample_result()
    document = JOB_RESULT_ADAPTER.dump_python(result, mode="json")
    document["spec"].update(device="cpu", batch_size="auto")
    document["spec"]["model"] = {"config": {"model_type": "some_future_lm", "hidden_size": 64}}
    assert JOB_RESULT_ADAPTER.validate_python(document).spec.device == "cpu"
    assert "model.config: model_type 'some_future_lm' is not one padbench measures" in refusal(document["spec"])
