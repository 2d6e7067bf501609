"""`padbench check SPEC`: the model, tokenizer and kernels a spec would use here, found without running it; and
`padbench check ID --against NAME`, the regression gate, told apart from it by the positional and `--against`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from padbench import cli
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


@pytest.mark.parametrize(("arguments", "complaint"), [
    (["41"], "argument --against: 41 is a job ID, which is checked against a baseline: add --against NAME"),
    (["spec.yaml", "--against", "main"], "argument --against: compares a job ID with a baseline, and 'spec.yaml' "
                                         "is not one"),
    (["spec.yaml", "--tolerance", "0.03"], "argument --tolerance: goes with --against (the regression gate)"),
])
def test_a_positional_that_does_not_fit_against_is_a_usage_error(arguments: list[str], complaint: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", *arguments])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"padbench check: error: {complaint}" in err


def test_a_job_id_with_against_runs_the_baseline_gate(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[dict[str, object]] = []

    def gate(args: argparse.Namespace) -> int:
        seen.append(vars(args))
        return 1

    monkeypatch.setattr(cli, "regression_gate", gate)
    assert main(["check", "41", "--against", "main", "--format", "json", "--server", "http://gpu-box:8000"]) == 1
    [args] = seen
    assert (args["job_id"], args["against"], args["tolerance"], args["format"]) == (41, "main", 0.0, "json")
    assert args["server"] == "http://gpu-box:8000"


def test_the_gate_is_the_same_as_baseline_check_down_to_its_usage_errors(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("PADBENCH_SERVER", "PADBENCH_TOKEN", "PADBENCH_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["check", "41", "--against", "main"]) == 2
    assert main(["baseline", "check", "41", "--against", "main"]) == 2
    gate, baseline = capsys.readouterr().err.splitlines()
    assert gate.startswith("padbench check: --server and --token-file or --token")
    assert gate.removeprefix("padbench check") == baseline.removeprefix("padbench baseline")


def test_help_describes_both_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "padbench check [-h] SPEC.yaml" in out and "--against NAME [--tolerance SHARE]" in out
    assert "padbench check SPEC.yaml says what a job spec would build" in out
    assert "padbench check ID --against NAME is the regression gate" in out
