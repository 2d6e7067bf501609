"""The memory plan on paper: model state per rank by part, from parameter counts on the meta device, and the
fit check that refuses a job before it loads anything."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

from padbench.contract.kinds import parse_job_spec
from padbench.contract.model_spec import ModelSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.memory_plan import (
    ModelFootprint,
    inference_plan,
    job_plan,
    model_footprint,
    replica_fits,
    replica_needs,
    resolve_inference,
    training_plan,
)
from padbench.worker.jobs.padding import fit
from padbench.worker.jobs.padding.fit import ModelDoesNotFit, check_model_fits, model_state_bytes

GiB = 2**30
LLAMA_8B = 8_030_261_248
# Per decoder layer: q and o 4096², k and v 4096·1024, the gated MLP 3·4096·14,336, two norms of 4096.
LLAMA_8B_LAYER = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
LLAMA_8B_ROOT = 2 * 128256 * 4096 + 4096  # embeddings, LM head (untied), final norm
LLAMA_70B = 70_553_706_496


@functools.cache
def footprint(preset: str) -> ModelFootprint:
    return model_footprint(ModelSpec(preset=preset))


def padding(**fields: Any) -> PaddingJobSpec:
    spec = parse_job_spec({"kind": "padding", "data": {"max_length": 1024}, **fields})
    assert isinstance(spec, PaddingJobSpec)
    return spec


@pytest.mark.parametrize(("preset", "parameters"), [
    ("llama-2-7b", 6_738_415_616), ("llama-2-13b", 13_015_864_320), ("llama-3.1-8b", LLAMA_8B),
    ("llama-3.1-70b", LLAMA_70B)])
def test_the_llama_presets_have_their_published_parameter_counts(preset: str, parameters: int) -> None:
    assert footprint(preset).parameters == parameters


def test_a_footprint_splits_the_parameters_into_decoder_layers_and_the_root() -> None:
    llama = footprint("llama-3.1-8b")
    assert (llama.decoder_layers, llama.largest_layer_parameters, llama.root_parameters) == (
        32, LLAMA_8B_LAYER, LLAMA_8B_ROOT)
    assert llama.root_parameters + 32 * llama.largest_layer_parameters == LLAMA_8B
    assert llama.gathered_parameters == LLAMA_8B_ROOT + 2 * LLAMA_8B_LAYER


def test_llama_8b_amp_training_on_two_gpus_shards_16_bytes_a_parameter_and_gathers_bf16_layers() -> None:
    plan = training_plan(footprint("llama-3.1-8b"), "bf16", "amp", ranks=2)
    assert (plan.parallelism, plan.compute_dtype) == ("sharded", "bf16")
    assert plan.weights == plan.gradients == LLAMA_8B // 2 * 4
    assert plan.optimizer == LLAMA_8B // 2 * 8
    assert plan.gathered_layers == (LLAMA_8B_ROOT + 2 * LLAMA_8B_LAYER) * 2 == 2_973_802_496
    assert plan.total == 67_215_892_480  # 62.6 GiB: 64.2 GB of sharded state and 3.0 GB gathered
    assert [name for name, _ in plan.parts()] == ["weights", "gradients", "optimizer state", "gathered layers"]
    assert str(plan) == ("training on 2 GPUs, sharded, amp: 62.6 GiB per rank (weights 15.0 GiB + gradients "
                         "15.0 GiB + optimizer state 29.9 GiB + gathered layers 2.8 GiB)")


def test_one_gpu_keeps_four_copies_in_the_dtype_or_16_bytes_with_amp_and_nothing_gathered() -> None:
    llama = footprint("llama-3.1-8b")
    assert training_plan(llama, "bf16", "bf16", ranks=1).total == LLAMA_8B * 2 * 4
    amp = training_plan(llama, "bf16", "amp", ranks=1)
    assert (amp.total, amp.gathered_layers, amp.parallelism) == (LLAMA_8B * 16, 0, "single")
    assert model_state_bytes(padding(model="llama-3.1-8b", mode="training")) == LLAMA_8B * 2 * 4
    assert model_state_bytes(padding(model="llama-3.1-8b", mode="training", training={"precision": "amp"})) == (
        LLAMA_8B * 16)


def test_llama_70b_training_on_eight_gpus_needs_16_of_them_with_amp_and_fits_80_gib_in_bf16() -> None:
    spec = padding(model="llama-3.1-70b", mode="training", gpus=8)
    amp = job_plan(spec, footprint("llama-3.1-70b"), 8, None)  # precision auto is amp on several GPUs
    gathered = (2 * 128256 * 8192 + 8192 + 2 * 855_654_400) * 2
    assert amp.precision == "amp" and amp.gathered_layers == gathered
    assert amp.total == LLAMA_70B // 8 * 16 + gathered == 148_732_739_584  # 138.5 GiB per rank
    bf16_spec = padding(model="llama-3.1-70b", mode="training", gpus=8, training={"precision": "bf16"})
    bf16 = job_plan(bf16_spec, footprint("llama-3.1-70b"), 8, None)
    assert bf16.total == LLAMA_70B // 8 * 8 + gathered == 78_179_033_088  # 72.8 GiB per rank
    assert bf16.total < 80 * GiB < amp.total


def test_inference_auto_replicates_8b_and_shards_70b_on_80_gib() -> None:
    assert resolve_inference("auto", footprint("llama-3.1-8b"), "bf16", 8, 80 * GiB) == "replicated"
    assert resolve_inference("auto", footprint("llama-3.1-70b"), "bf16", 8, 80 * GiB) == "sharded"
    assert resolve_inference("auto", footprint("llama-3.1-70b"), "bf16", 8, None) == "replicated"  # memory unknown
    assert resolve_inference("sharded", footprint("llama-3.1-8b"), "bf16", 8, 80 * GiB) == "sharded"
    assert resolve_inference("auto", footprint("llama-3.1-70b"), "bf16", 1, 80 * GiB) == "single"
    sharded = inference_plan(footprint("llama-3.1-70b"), "bf16", 8, "sharded")
    assert sharded.weights == LLAMA_70B // 8 * 2 and sharded.gradients == sharded.optimizer == 0
    assert inference_plan(footprint("llama-3.1-8b"), "bf16", 8, "replicated").total == LLAMA_8B * 2


def test_a_replica_fits_from_the_weights_and_headroom_it_names() -> None:
    llama = footprint("llama-3.1-8b")
    needs = replica_needs(llama, "bf16")
    assert needs == max(LLAMA_8B * 2 + 2 * GiB, -(-LLAMA_8B * 2 // 0.9))
    assert replica_fits(llama, "bf16", needs) and not replica_fits(llama, "bf16", LLAMA_8B * 2 + GiB)


def free_memory(monkeypatch: pytest.MonkeyPatch, free_gib: float) -> None:
    monkeypatch.setattr(fit, "device_free_bytes", lambda device: (int(free_gib * GiB), 80 * GiB))


def test_the_fit_check_refuses_a_sharded_job_with_the_bytes_per_rank_by_part(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = padding(model="llama-3.1-8b", device="cuda", mode="training", gpus=2)
    free_memory(monkeypatch, 40)
    with pytest.raises(ModelDoesNotFit) as refusal:
        check_model_fits(spec, torch.device("cuda"), ranks=2)
    assert str(refusal.value) == (
        "model 'llama-3.1-8b' does not fit: its weights, gradients and optimizer state in amp (fp32, computing in "
        "bf16) (weights 15.0 GiB + gradients 15.0 GiB + optimizer state 29.9 GiB + gathered layers 2.8 GiB) need "
        "62.6 GiB per rank (sharded over 2 GPUs), and the GPU has 40.0 GiB free of 80.0 GiB, before any batch")
    free_memory(monkeypatch, 79)
    check_model_fits(spec, torch.device("cuda"), ranks=2)
    with pytest.raises(ModelDoesNotFit, match=r"need 119\.7 GiB, and the GPU has 79\.0 GiB free"):
        check_model_fits(padding(model="llama-3.1-8b", device="cuda", mode="training", training={"precision": "amp"}),
                         torch.device("cuda"))


def test_the_fit_check_shards_70b_inference_that_one_gpu_cannot_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = padding(model="llama-3.1-70b", device="cuda", gpus=8)
    free_memory(monkeypatch, 79)
    check_model_fits(spec, torch.device("cuda"), ranks=8)  # sharded: 23.5 GiB per rank
    with pytest.raises(ModelDoesNotFit, match=r"its weights in bf16 need 131\.4 GiB, and the GPU has 79\.0 GiB"):
        check_model_fits(spec.model_copy(update={"gpus": 1}), torch.device("cuda"))
    check_model_fits(spec, torch.device("cpu"), ranks=8)  # a CPU has no device memory to check


# LoRA r on every linear map of a llama-3.1-8b layer: r·(in + out) for q, k, v, o, gate, up, down.
LLAMA_8B_ADAPTERS_PER_RANK_1 = 32 * (2 * (4096 + 4096) + 2 * (4096 + 1024) + 2 * (4096 + 14336) + (14336 + 4096))
LLAMA_8B_LINEAR_WEIGHTS = 32 * (LLAMA_8B_LAYER - 2 * 4096)  # what QLoRA quantizes: all but the norms and the root


@pytest.mark.parametrize("rank", [8, 16])
def test_lora_keeps_gradients_and_adamw_state_for_the_adapters_alone(rank: int) -> None:
    spec = padding(mode="training", model="llama-3.1-8b", training={"method": "lora", "lora": {"r": rank}})
    plan = job_plan(spec, footprint("llama-3.1-8b"), 1, None)
    adapters = rank * LLAMA_8B_ADAPTERS_PER_RANK_1
    assert plan.trainable_parameters == adapters
    assert plan.weights == (LLAMA_8B + adapters) * 2  # the frozen base and the adapters, all bf16
    assert (plan.gradients, plan.optimizer) == (adapters * 2, adapters * 2 * 2)
    full = job_plan(padding(mode="training", model="llama-3.1-8b"), footprint("llama-3.1-8b"), 1, None)
    assert full.trainable_parameters is None and plan.total < full.total / 3


def test_qlora_keeps_the_base_linear_layers_in_four_bits_and_fp32_adapters() -> None:
    spec = padding(mode="training", model="llama-3.1-8b", training={"method": "qlora", "lora": {"r": 16}})
    plan = job_plan(spec, footprint("llama-3.1-8b"), 1, None)
    adapters = 16 * LLAMA_8B_ADAPTERS_PER_RANK_1
    unquantized = LLAMA_8B - LLAMA_8B_LINEAR_WEIGHTS
    assert plan.weights == unquantized * 2 + LLAMA_8B_LINEAR_WEIGHTS * (0.5 + 1 / 64) + adapters * 4
    assert (plan.gradients, plan.optimizer) == (adapters * 4, adapters * 4 * 2)


def test_lora_on_several_ranks_shards_the_base_and_the_adapters() -> None:
    spec = padding(mode="training", model="llama-3.1-8b", gpus=2, training={"method": "lora", "lora": {"r": 16}},
                   device="cuda", attention="sdpa")
    plan = job_plan(spec, footprint("llama-3.1-8b"), 2, None)
    adapters = 16 * LLAMA_8B_ADAPTERS_PER_RANK_1
    assert plan.precision == "amp"  # fp32 base and adapters
    assert plan.weights == LLAMA_8B * 4 // 2 + adapters // 2 * 4
    assert plan.gradients == adapters // 2 * 4
    assert plan.gathered_layers == footprint("llama-3.1-8b").gathered_parameters * 2
