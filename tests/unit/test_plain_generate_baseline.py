"""The plain `generate` baseline runs a generate spec's requests through transformers' own loop, with the KV cache
that padbench's forward configs switch off, and reports what it timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.specfile import load_spec
from scripts import plain_generate_baseline

SPEC = """kind: generate
name: plain-generate
model: tiny-qwen3
data: {source: synthetic, max_length: 24, num_samples: 6, seed: 0}
output_length: 3
strategies: [static]
attention: sdpa
batch_size: 4
dtype: fp32
device: cpu
"""


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def test_the_plain_model_generates_through_its_cache(spec_file: Path) -> None:
    spec = load_spec(spec_file)
    assert isinstance(spec, GenerateJobSpec)
    model = plain_generate_baseline.plain_model(spec, torch.device("cpu"))
    assert model.config.use_cache is True
    assert model.config._attn_implementation == "sdpa"


def test_the_script_times_every_request_each_repeat(spec_file: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    result_path = tmp_path / "plain.json"
    monkeypatch.setattr(sys, "argv", ["plain_generate_baseline", str(spec_file), "--repeats", "2",
                                      "--json", str(result_path)])
    plain_generate_baseline.main()
    result = json.loads(result_path.read_text())
    assert (result["requests"], result["output_tokens"], result["batch_size"]) == (6, 18, 4)
    assert len(result["repeat_tokens_per_s"]) == 2 and min(result["repeat_tokens_per_s"]) > 0
    assert result["device"] == "cpu"
