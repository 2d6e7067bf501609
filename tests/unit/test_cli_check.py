"""`padbench check SPEC`: the model, tokenizer and kernels a spec would use here, found without running it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from padbench.cli import main

GEMMA2_ON_SDPA = {"model": {"preset": "tiny-gemma2"}, "attention": "sdpa", "dtype": "fp32", "device": "cpu",
                  "strategies": ["static", "packed"], "data": {"max_length": 32, "num_samples": 8}}


def check(tmp_path: Path, spec: dict[str, object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code = main(["check", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_spec_that_runs_here_lists_its_model_and_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(tmp_path, {**GEMMA2_ON_SDPA, "attention": "eager"}, capsys)
    assert code == 0
    assert "model: gemma2" in out and "of weights in fp32" in out
    assert "static / eager: eager runs" in out and "packed / eager: eager-block-mask runs" in out


def test_a_kernel_that_would_be_refused_says_why_and_exits_1(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(tmp_path, GEMMA2_ON_SDPA, capsys)
    assert code == 1
    assert "✗ static / sdpa: sdpa refused: sdpa does not apply attention logit soft-capping" in out


def test_a_generate_spec_names_its_decode_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"kind": "generate", "model": {"preset": "tiny-llama"}, "attention": "sdpa", "dtype": "fp32",
            "device": "cpu"}
    code, out, _ = check(tmp_path, spec, capsys)
    assert code == 0 and "sdpa: sdpa-kvcache runs" in out


def test_a_tokenizer_beyond_the_vocabulary_is_a_finding(tmp_path: Path, tokenizer_dir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    small = {**GEMMA2_ON_SDPA, "attention": "eager",
             "model": {"config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 64}},
             "data": {"source": "corpus.txt", "tokenizer": str(tokenizer_dir), "max_length": 32}}
    code, out, _ = check(tmp_path, small, capsys)
    assert code == 1 and "beyond the model's vocabulary of 64" in out


def test_an_invalid_spec_exits_2_in_the_users_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(tmp_path, {"model": {"preset": "tiny-lama"}}, capsys)
    assert code == 2 and "model.preset: 'tiny-lama'" in err and "Error" not in err
