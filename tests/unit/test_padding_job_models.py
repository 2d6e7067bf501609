"""Padding jobs on models other than GPT-2: training, grouped-query attention recorded, refusals before any
work, the model directory's own tokenizer, and a model too large for the GPU failing at once."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import LlamaConfig

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.jobs.padding import fit
from padbench.worker.jobs.padding.fit import ModelDoesNotFit, check_model_fits, model_state_bytes
from padbench.worker.jobs.padding.job import data_with_tokenizer, run_padding_job

TINY_LLAMA = {"config": {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
                         "max_position_embeddings": 64}}


def spec(**overrides: Any) -> PaddingJobSpec:
    document: dict[str, Any] = {
        "model": TINY_LLAMA,
        "data": {"source": "synthetic", "max_length": 48, "num_samples": 16, "seed": 1},
        "strategies": ["static", {"name": "binned", "n_bins": 2}, "packed"], "attention": "sdpa", "batch_size": 4,
        "dtype": "fp32", "device": "cpu",
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 2, "correctness_samples": 4,
                        "repeats": 1},
    }
    document.update(overrides)
    return PaddingJobSpec.model_validate(document)


@pytest.mark.slow
@pytest.mark.parametrize(("attention", "gqa"), [("sdpa", "native"), ("eager", "expanded")])
def test_a_gqa_llama_trains_in_every_layout_and_records_how_gqa_ran(attention: str, gqa: str) -> None:
    result = run_padding_job(spec(mode="training", attention=attention), lambda fraction, message: None)
    assert [row.status for row in result.strategies] == ["ok"] * 3, [row.error for row in result.strategies]
    assert {row.gqa for row in result.strategies} == {gqa}
    assert all(row.correctness_passed for row in result.strategies)
    assert result.flops_per_token > 0 and result.matmul_tflops is None  # no GEMM rate stated on a CPU


def test_a_model_type_that_cannot_run_fails_the_job_before_any_data_is_read() -> None:
    bad = spec(model={"config": {"model_type": "bert"}},
               data={"source": "/nonexistent/corpus.txt", "tokenizer": "/nonexistent", "max_length": 48})
    with pytest.raises(ValueError, match=r"model\.config: model_type .bert. is not a causal language model"):
        run_padding_job(bad, lambda fraction, message: None)


def test_a_model_directory_with_tokenizer_files_is_the_default_tokenizer(tmp_path: Path,
                                                                         tokenizer_dir: Path) -> None:
    LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=30522).save_pretrained(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a line of text\n")
    job = spec(model=str(tmp_path), data={"source": str(corpus), "max_length": 48})
    with pytest.raises(ValueError, match="holds no tokenizer files"):
        data_with_tokenizer(job)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, tmp_path / name)
    assert data_with_tokenizer(job).tokenizer == str(tmp_path)


def test_a_submitted_text_source_needs_a_tokenizer_unless_the_model_directory_has_one() -> None:
    with pytest.raises(ValueError, match=r"data\.tokenizer is required"):
        spec(data={"source": "corpus.txt", "max_length": 48})


def test_a_model_larger_than_the_gpus_free_memory_fails_at_once_with_the_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    big = spec(model="llama-3.1-8b", device="cuda", dtype="bf16", mode="training",
               data={"source": "synthetic", "max_length": 1024})
    needed = model_state_bytes(big)
    assert needed == 8_030_261_248 * 2 * 4  # weights, gradients and AdamW's two moments in bf16
    monkeypatch.setattr(fit, "device_free_bytes", lambda device: (40 * 2**30, 80 * 2**30))
    with pytest.raises(ModelDoesNotFit, match=r"need 59\.8 GiB, and the GPU has 40\.0 GiB free of 80\.0 GiB"):
        check_model_fits(big, torch.device("cuda"))
    inference = big.model_copy(update={"mode": "inference"})
    check_model_fits(inference, torch.device("cuda"))  # 15 GiB of weights fit


def test_mixtral_on_one_80_gib_gpu_fails_at_once_with_the_bytes_its_experts_need(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mixtral = spec(model="mixtral-8x7b", device="cuda", dtype="bf16", data={"source": "synthetic", "max_length": 1024})
    monkeypatch.setattr(fit, "device_free_bytes", lambda device: (79 * 2**30, 80 * 2**30))
    # Every expert is resident though a token uses 2 of 8: 46.7B parameters, 2 bytes each.
    with pytest.raises(ModelDoesNotFit, match=r"weights in bf16 need 87\.0 GiB, and the GPU has 79\.0 GiB free"):
        check_model_fits(mixtral, torch.device("cuda"))
