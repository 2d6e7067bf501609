"""A row that runs out of memory says which setting the memory plan estimates would fit."""

from __future__ import annotations

import pytest
import torch

from padbench.contract.spec import DataSpec, ModelSpec, ProbeSpec, StrategySpec
from padbench.contract.training import TrainingSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.step_memory import HEADROOM, StepPlanner
from padbench.worker.jobs.padding.oom_hint import fitting_settings, with_fitting_settings

MIB = 2**20
MODEL = ModelSpec(config={"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 512,
                          "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
                          "max_position_embeddings": 512})
STATIC = StrategySpec(name="static")


def spec(checkpointing: str = "none", mode: str = "training", budget: int | None = None) -> PaddingJobSpec:
    return PaddingJobSpec(model=MODEL, device="cpu", dtype="fp32", attention="sdpa", mode=mode, batch_size=64,
                          data=DataSpec(max_length=512), strategies=[STATIC],
                          training=TrainingSpec(activation_checkpointing=checkpointing),  # type: ignore[arg-type]
                          probe=ProbeSpec(cpu_memory_budget_bytes=budget))


def room_for(job: PaddingJobSpec, batch_size: int, level: str | None) -> int:
    """Just enough room for that step by the plan."""
    return int(StepPlanner(job, 1).fit(batch_size, level, None, 512).needed / (1 - HEADROOM)) + 1  # type: ignore[arg-type]


def test_a_training_row_is_pointed_to_more_recompute_and_to_a_smaller_batch() -> None:
    job = spec()
    said = fitting_settings(job, 512, 64, ranks=1, available=room_for(job, 64, "ops"))
    assert said.startswith("by the memory plan, in the ")
    assert "training.activation_checkpointing ops at batch 64 (est." in said
    assert "; or batch_size 32 (est." in said
    assert said.endswith("(batch_size auto finds the largest batch that fits)")
    tight = fitting_settings(job, 512, 64, ranks=1, available=room_for(job, 64, "full"))
    assert "training.activation_checkpointing full at batch 64 (est." in tight


def test_under_full_recompute_only_a_smaller_batch_is_named() -> None:
    job = spec("full")
    said = fitting_settings(job, 512, 64, ranks=1, available=room_for(job, 8, "full"))
    assert "activation_checkpointing" not in said and "batch_size 8 (est." in said


def test_a_model_whose_state_does_not_fit_is_pointed_to_more_gpus() -> None:
    job = spec()
    state = StepPlanner(job, 1).fit(1, "full", None, 512).state
    said = fitting_settings(job, 512, 64, ranks=1, available=int(state * 0.6))
    assert "gpus: 2 (sharded" in said or "gpus: 4 (sharded" in said


def test_inference_is_pointed_to_a_smaller_batch() -> None:
    job = spec(mode="inference")
    said = fitting_settings(job, 512, 64, ranks=1, available=room_for(job, 16, None))
    assert "batch_size 16 (est." in said and "checkpointing" not in said


def test_an_out_of_memory_error_keeps_its_type_and_first_sentences() -> None:
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                                   "79.19 GiB of which 1.2 GiB is free. Including non-PyTorch memory, this process")
    job = spec(budget=room_for(spec(), 16, "none"))
    hinted = with_fitting_settings(error, job, STATIC, 64, 1, torch.device("cpu"))
    assert isinstance(hinted, torch.OutOfMemoryError)
    assert str(hinted).startswith("CUDA out of memory. Tried to allocate 2.00 GiB. by the memory plan")
    assert "Including non-PyTorch" not in str(hinted)


@pytest.mark.parametrize("error", [ValueError("a kernel refused"), RuntimeError("CUDA error: illegal address")])
def test_other_errors_are_left_as_they_are(error: Exception) -> None:
    assert with_fitting_settings(error, spec(), STATIC, 64, 1, torch.device("cpu")) is error


def test_without_a_known_limit_it_says_so() -> None:
    said = fitting_settings(spec(), 512, 64, ranks=1, available=None)
    assert said == "no memory limit is known here, so the memory plan cannot say what would fit"
