"""Settling `attention: auto` in a job's process on the CPU: the candidates that run here, the static default, and
the spec the kind then runs, from a table written for the test."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import torch

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.jobs.kernel_choice import candidates, settle_attention, static_default
from padbench.worker.runtime.kernel_evidence import model_digest
from padbench.worker.runtime.kernel_speeds import Figure, KernelSpeeds, Place

MODEL = {"config": {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 512, "n_positions": 64}}
PLAIN = AttentionFeatures(query_heads=2, kv_heads=2, softcap=None, sliding_window=None)


def padding(**fields: Any) -> PaddingJobSpec:
    spec = parse_job_spec({"model": MODEL, "dtype": "fp32", "device": "cpu", "data": {"max_length": 64}, **fields})
    assert isinstance(spec, PaddingJobSpec)
    return spec


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelSpeeds:
    path = tmp_path / "kernel-speeds.json"
    monkeypatch.setenv("PADBENCH_KERNEL_SPEEDS_FILE", str(path))
    return KernelSpeeds(path)


def measured(family: str, rate: float, entry: str = "padded") -> Figure:
    return Figure(place=Place("padding", "cpu", "fp32", "inference", entry), band=0, model="custom gpt2",
                  model_digest=model_digest(padding().model), setting="static · batch 32 · compile auto",
                  family=family, kernel=family, rate=rate, metric="tokens/s", source="job 42",
                  measured_at=datetime.now(timezone.utc).isoformat())


def test_the_candidates_run_here_in_the_job_s_dtype_and_apply_what_the_model_needs() -> None:
    cpu = torch.device("cpu")
    assert candidates("padded", cpu, torch.float32, PLAIN, 64) == ["eager", "flex", "sdpa"]  # no flash in fp32
    assert candidates("padded", cpu, torch.bfloat16, PLAIN, 64)[0] == "torch-flash"  # flash implementations first
    capped = AttentionFeatures(query_heads=2, kv_heads=2, softcap=50.0, sliding_window=None)
    assert "sdpa" not in candidates("decode", cpu, torch.float32, capped, 64)  # sdpa drops Gemma 2's soft-capping


def test_the_static_default_is_flash_where_one_runs_else_sdpa() -> None:
    assert static_default(["torch-flash", "eager", "sdpa"]) == "flash"
    assert static_default(["torch-flash", "sdpa"], taken=["flash-attn"]) == "torch-flash"  # never the one taken
    assert static_default(["eager", "flex", "sdpa"]) == "sdpa"
    # Decoding on a GPU: flex, measured fastest there; on the CPU, or where flex cannot decode, as before.
    assert static_default(["torch-flash", "flex", "sdpa"], entry="decode", device_type="cuda") == "flex"
    assert static_default(["torch-flash", "flex", "sdpa"], entry="decode", device_type="cpu") == "flash"
    assert static_default(["torch-flash", "sdpa"], entry="decode", device_type="cuda") == "flash"
    assert static_default(["torch-flash", "flex"], entry="packed", device_type="cuda") == "flash"


def test_a_spec_naming_its_attention_is_left_alone(table: KernelSpeeds) -> None:
    spec = padding(attention="sdpa")
    assert settle_attention(spec) == (spec, None)


def test_auto_runs_the_measured_fastest_per_layout_and_never_repeats_a_named_row(table: KernelSpeeds) -> None:
    table.record([measured("eager", 900.0), measured("sdpa", 800.0), measured("flex", 100.0)])
    spec = padding(strategies=["static", {"name": "static", "attention": "eager"}, "packed"])
    settled, picks = settle_attention(spec)
    assert isinstance(settled, PaddingJobSpec) and picks is not None
    # static's auto row may not repeat eager, which another static row names: sdpa, the next measured.
    assert [settled.attention_for(strategy) for strategy in settled.strategies] == ["sdpa", "eager", "sdpa"]
    assert [(pick.entry, pick.chosen, pick.measured) for pick in picks] == [("padded", "sdpa", True),
                                                                            ("packed", "sdpa", False)]
    assert picks[0].reason.startswith("fastest measured: sdpa 800 tokens/s vs flex 100 (static · batch 32")
    alone, only = settle_attention(padding(strategies=["static"]))
    assert isinstance(alone, PaddingJobSpec) and only is not None
    assert (only[0].chosen, alone.attention) == ("eager", "eager")  # nothing named: the fastest measured


def test_a_generate_job_settles_its_kv_cache_kernel(table: KernelSpeeds) -> None:
    spec = parse_job_spec({"kind": "generate", "model": "tiny-llama", "dtype": "fp32", "device": "cpu"})
    settled, picks = settle_attention(spec)
    assert isinstance(settled, GenerateJobSpec) and settled.attention == "sdpa"
    assert picks is not None and [(pick.entry, pick.chosen, pick.measured) for pick in picks] == [
        ("decode", "sdpa", False)]
