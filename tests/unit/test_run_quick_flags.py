"""`padbench run --model NAME …`: a generate or padding job from flags alone, as serving benchmarks take theirs,
built into the same validated spec a file makes; run end to end on a model directory made here, offline."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from transformers import LlamaConfig

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.generate.contract import GenerateResult
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.cli.run import FLAGS_SOURCE

# Small enough to run in seconds on a busy CPU: one measured pass, a few warm-up requests and gate samples.
GENERATE_QUICK = [
    "--set",
    "measurement={repeats: 1, warmup_requests: 1, correctness_samples: 1}",
    "--set",
    "strategies=[static,continuous]",
    "--set",
    "references=[]",
]
PADDING_QUICK = [
    "--set",
    "strategies=[static,packed]",
    "--set",
    "measurement={warmup_batches: 1, min_seconds: 0, min_batches: 1, repeats: 1, correctness_samples: 1}",
]


@pytest.fixture(autouse=True)
def one_thread_children(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # tiny matmuls on a shared CPU: no OpenMP spin-waits
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer Llama's config.json: a local model directory, built with random weights by the job."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=512,
        max_position_embeddings=256,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    ).save_pretrained(directory)
    return directory


@pytest.mark.slow
def test_a_generate_job_from_serving_benchmark_flags(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "generate.json"
    code = main(
        [
            "run",
            "--model",
            str(model_dir),
            "--input-len",
            "16",
            "--output-len",
            "4",
            "--num-prompts",
            "8",
            "--batch-size",
            "4",
            *GENERATE_QUICK,
            "--json",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    result = JOB_RESULT_ADAPTER.validate_json(out.read_bytes())
    assert isinstance(result, GenerateResult)
    assert result.spec.model.path == str(model_dir) and result.spec.data.distribution == "fixed:16"
    assert (result.num_requests, result.prompt_tokens_total, result.output_tokens_total) == (8, 8 * 16, 8 * 4)
    assert [row.status for row in result.rows] == ["ok", "ok"] and all(row.batch_size == 4 for row in result.rows)
    assert all(row.time_per_output_token is not None for row in result.rows)
    assert "TPOT p50/p99" in capsys.readouterr().out


@pytest.mark.slow
def test_a_padding_job_from_flags(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "padding.json"
    code = main(
        [
            "run",
            "--model",
            str(model_dir),
            "--batch-size",
            "4",
            "--input-len",
            "64",
            "--num-prompts",
            "16",
            *PADDING_QUICK,
            "--json",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    result = JOB_RESULT_ADAPTER.validate_json(out.read_bytes())
    assert isinstance(result, PaddingResult) and result.spec.batch_size == 4
    assert result.spec.data.max_length == 64 and result.num_sequences == 16
    assert [row.status for row in result.strategies] == ["ok", "ok"]


def test_flags_set_their_keys_in_a_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "flash"}))
    # The file's own keys are checked with the flags' values in them: flash on fp32 is still refused.
    assert main(["run", str(spec), "--batch-size", "4", "--model", "tiny"]) == 2
    assert "needs dtype bf16 or fp16" in capsys.readouterr().err
    assert main(["run", str(spec), "--output-len", "4"]) == 2  # a padding job has no output length
    assert "output_length" in capsys.readouterr().err


def test_bad_flags_are_refused_as_a_file_would_be(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    error = capsys.readouterr().err
    assert "give a spec file" in error and "--model" in error
    assert main(["run", "--model", "gpt3", "--output-len", "4"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"padbench run: {FLAGS_SOURCE}: ") and "gpt3" in error
    with pytest.raises(SystemExit):
        main(["run", "--model", "tiny", "--output-len", "0"])
    assert "must be at least 1" in capsys.readouterr().err
