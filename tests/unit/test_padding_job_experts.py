"""Mixtures of experts in padding jobs: the experts' implementation as an axis (one row each, the one that ran
recorded), each row's expert load, the report's lines, training, and the refusals (a dense model, a name that is
no implementation, one that cannot run here). Every layout on every CPU kernel through the gate is
`tests/unit/test_model_families.py`; the FLOP rules against torch's counter are `tests/unit/test_flops.py`."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from pydantic import ValidationError

from padbench.contract.experts import ExpertLoad
from padbench.contract.model_spec import ModelSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.worker.engine.model import experts as experts_module
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.model.expert_load import summarize_load
from padbench.worker.engine.model.experts import ExpertsUnavailable, use_experts
from padbench.worker.jobs.padding.job import run_padding_job
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.supervisor.capabilities import runnable_experts

CPU = torch.device("cpu")


def spec(**overrides: Any) -> PaddingJobSpec:
    document: dict[str, Any] = {
        "model": "tiny-mixtral", "data": {"source": "synthetic", "max_length": 32, "num_samples": 12, "seed": 1},
        "strategies": ["static", "packed"], "attention": "sdpa", "batch_size": 4, "dtype": "fp32", "device": "cpu",
        "measurement": {"warmup_batches": 0, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 3,
                        "repeats": 1},
    }
    document.update(overrides)
    return PaddingJobSpec.model_validate(document)


def check_load(load: ExpertLoad | None, padded: bool) -> None:
    assert load is not None and load.experts == 4 and load.top_k == 2 and len(load.layers) == 2
    for layer in load.layers:  # every routed token reaches k experts: the assignments add up
        assert layer.mean_tokens * load.experts == load.routed_tokens * load.top_k
        assert layer.mean_tokens <= layer.max_tokens <= load.routed_tokens
    assert (load.padding_share > 0) if padded else (load.padding_share == 0)


@pytest.mark.slow
def test_a_list_of_experts_implementations_measures_one_row_each_and_records_what_ran() -> None:
    result = run_padding_job(spec(experts=["eager", "batched_mm"]), lambda fraction, message: None)
    rows = result.strategies
    assert [(row.strategy, row.experts) for row in rows] == [
        ("static", "eager"), ("static", "batched_mm"), ("packed", "eager"), ("packed", "batched_mm")]
    assert all(row.status == "ok" and row.correctness_passed for row in rows), [row.error for row in rows]
    assert result.active_parameters is not None and result.active_parameters < result.model_parameters
    for row in rows:
        check_load(row.expert_load, padded=row.strategy == "static")
    # The router's choices do not depend on the implementation: the same work per layout.
    assert rows[0].expert_load == rows[1].expert_load and rows[2].expert_load == rows[3].expert_load
    table = render_table(result)
    assert "sdpa · experts batched_mm" in table and "active per token" in table
    assert "padding tokens routed: 0% of expert work" in table  # packed
    assert [row["experts"] for row in csv_rows(result)] == ["eager", "batched_mm"] * 2


@pytest.mark.slow
def test_a_mixture_trains_with_transformers_default_experts_recorded() -> None:
    result = run_padding_job(spec(model="tiny-qwen3-moe", mode="training", strategies=["dynamic", "packed"]),
                             lambda fraction, message: None)
    assert all(row.status == "ok" for row in result.strategies), [row.error for row in result.strategies]
    default = build_model(ModelSpec(preset="tiny-qwen3-moe"), torch.float32, CPU, seed=0).config
    assert {row.experts for row in result.strategies} == {default._experts_implementation}


def test_gpt_oss_rows_are_refused_on_kernels_without_attention_sinks() -> None:
    result = run_padding_job(spec(model="tiny-gpt-oss", strategies=["packed"], experts="eager"),
                             lambda fraction, message: None)
    [row] = result.strategies
    assert row.status == "failed" and row.error is not None and "attention sinks" in row.error


def test_experts_on_a_dense_preset_is_refused_at_submission_naming_the_field() -> None:
    problems = spec(model="tiny-llama", experts="eager").new_job_problems()
    assert any(where == ("experts",) and "applies only to mixtures of experts" in why and "'tiny-llama'" in why
               for where, why in problems)
    assert not spec(experts="eager").new_job_problems()


def test_experts_on_a_dense_config_fails_the_job_before_anything_is_built() -> None:
    dense = spec(model={"config": {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                                   "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 512}},
                 experts="batched_mm")
    with pytest.raises(SpecProblem, match=r"^experts: applies only to mixtures of experts"):
        run_padding_job(dense, lambda fraction, message: None)


def test_an_unknown_implementation_is_refused_with_the_choices() -> None:
    with pytest.raises(ValidationError, match=r"experts\n.*must be one of eager, batched_mm, grouped_mm"):
        spec(experts=["eager", "megablocks"])


def test_an_implementation_that_cannot_run_here_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    model = build_model(ModelSpec(preset="tiny-olmoe"), torch.float32, CPU, seed=0)
    monkeypatch.delattr(torch.nn.functional, "grouped_mm", raising=False)
    monkeypatch.delattr(torch, "_grouped_mm", raising=False)
    with pytest.raises(ExpertsUnavailable, match=r"experts 'grouped_mm' cannot run on cpu: torch .* has no grouped"):
        use_experts(model, "grouped_mm", CPU)
    with pytest.raises(ExpertsUnavailable, match=r"transformers' default 'grouped_mm' .*name one that can"):
        use_experts(model, None, CPU, default="grouped_mm")
    assert use_experts(model, "eager", CPU) == "eager" == model.config._experts_implementation
    assert use_experts(build_model(ModelSpec(preset="tiny-llama"), torch.float32, CPU, seed=0), None, CPU) is None


def test_a_mixture_whose_implementation_transformers_lacks_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(experts_module, "_registered_in_transformers", lambda name: "transformers X has none")
    with pytest.raises(ExpertsUnavailable, match="experts 'batched_mm' cannot run on cpu: transformers X has none"):
        use_experts(build_model(ModelSpec(preset="tiny-mixtral"), torch.float32, CPU, seed=0), "batched_mm", CPU)


def test_load_summary_counts_each_layer_and_padding_share() -> None:
    # 10 tokens routed to 2 of 4 experts in 2 layers; 6 of them real.
    load = summarize_load([[5, 5, 5, 5], [8, 4, 4, 4]], k=2, real_tokens=6)
    assert load.routed_tokens == 10 and load.padding_share == pytest.approx(0.4)
    assert [(layer.max_tokens, layer.mean_tokens) for layer in load.layers] == [(5, 5.0), (8, 5.0)]
    assert load.max_imbalance == pytest.approx(1.6) and load.mean_imbalance == pytest.approx(1.3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_layout_and_experts_implementation_passes_the_bf16_gate_on_a_gpu() -> None:
    """bf16 on a GPU: routers near a tie may pick another k-th expert in another layout's reduction order; the
    gate's tolerance (the dtype's, or twice the noise floor of two correct references) must still hold, and
    grouped_mm must run as torch's grouped matmul (compute capability 8.0 or later)."""
    result = run_padding_job(spec(model="tiny-olmoe", device="cuda", dtype="bf16", attention="torch-flash",
                                  strategies=["static", "dynamic", {"name": "binned", "n_bins": 2}, "packed"],
                                  experts=["grouped_mm", "batched_mm", "eager"],
                                  data={"source": "synthetic", "max_length": 256, "num_samples": 64, "seed": 1}),
                             lambda fraction, message: None)
    assert len(result.strategies) == 12
    assert all(row.status == "ok" and row.correctness_passed for row in result.strategies), \
        [(row.label, row.experts, row.error) for row in result.strategies if row.status != "ok"]


def test_a_worker_lists_the_implementations_that_run_on_it() -> None:
    assert runnable_experts("cpu") == ["batched_mm", "eager", "grouped_mm"]  # torch 2.13 has a CPU grouped matmul
