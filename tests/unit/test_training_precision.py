"""Training precision on one process: `amp` keeps fp32 weights and computes each forward in the job's dtype."""

from __future__ import annotations

import pytest
import torch

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention.base import autocast_inputs
from padbench.worker.jobs.padding.job import prepare_job, run_padding_job


def amp_spec(precision: str) -> PaddingJobSpec:
    return PaddingJobSpec.model_validate({
        "mode": "training", "model": {"preset": "tiny-llama"}, "training": {"precision": precision},
        "data": {"source": "synthetic", "max_length": 48, "num_samples": 12, "seed": 2},
        "strategies": ["static", "packed"], "attention": "sdpa", "batch_size": 4, "dtype": "bf16", "device": "cpu",
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 2,
                        "repeats": 1}})


def test_amp_trains_fp32_weights_through_half_precision_kernels() -> None:
    setup = prepare_job(amp_spec("amp"), lambda *_: None)
    assert setup.precision == "amp" and setup.autocast
    assert {parameter.dtype for parameter in setup.model.parameters()} == {torch.float32}
    result = run_padding_job(amp_spec("amp"), lambda *_: None)
    assert [row.status for row in result.strategies] == ["ok", "ok"], [row.error for row in result.strategies]
    assert result.training is not None and result.training.precision == "amp"
    assert result.training.loss == "chunked-linear-cross-entropy" and result.training.method == "full"
    assert result.training.trainable_parameters == result.training.total_parameters == result.model_parameters


def test_adapters_count_a_backward_without_weight_gradients() -> None:
    full = prepare_job(amp_spec("bf16"), lambda *_: None)
    lora = prepare_job(amp_spec("bf16").model_copy(update={"training": amp_spec("bf16").training.model_copy(
        update={"method": "lora"})}), lambda *_: None)
    assert (full.flop_factor, lora.flop_factor) == (3, 2)


def test_pure_half_precision_keeps_the_weights_in_the_dtype() -> None:
    setup = prepare_job(amp_spec("bf16"), lambda *_: None)
    assert setup.precision == "bf16" and not setup.autocast
    assert {parameter.dtype for parameter in setup.model.parameters()} == {torch.bfloat16}


def test_rotary_promoted_inputs_go_to_the_autocast_dtype() -> None:
    promoted = torch.ones(2, 3, dtype=torch.float32)
    assert autocast_inputs(promoted)[0].dtype == torch.float32  # no autocast: untouched
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_inputs(promoted, promoted)[1].dtype == torch.bfloat16


@pytest.mark.parametrize(("document", "words"), [
    ({"training": {"precision": "amp"}, "dtype": "fp32"}, "training.precision amp computes in a half-precision"),
    ({"training": {"precision": "bf16"}, "dtype": "fp16"}, "training.precision bf16 keeps everything in bf16"),
])
def test_precisions_that_contradict_the_dtype_are_refused(document: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        PaddingJobSpec.model_validate({**document, "attention": "sdpa"})


def test_compile_on_several_gpus_is_accepted_at_submission() -> None:
    spec = PaddingJobSpec.model_validate({"gpus": 2, "compile": True, "attention": "sdpa", "device": "cuda"})
    assert spec.new_job_problems() == []


def test_the_table_says_how_the_job_trained_and_where_its_steps_went() -> None:
    from padbench.kinds.padding.report import csv_rows, render_table

    result = run_padding_job(amp_spec("amp"), lambda *_: None)
    text = render_table(result)
    assert "trained: weights in amp, loss chunked-linear-cross-entropy, activation checkpointing none" in text
    assert "step split:" in text and "optimizer" in text
    assert all(row["backward_s"] is not None and row["backward_s"] > 0 for row in csv_rows(result))
