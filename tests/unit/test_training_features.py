"""Training features on a tiny model: LoRA trains its adapters alone, activation checkpointing keeps fewer
activations and computes the same gradients through the attention kernels, and what cannot run here is
refused with the field and the reason."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from padbench.contract.spec import ModelSpec
from padbench.contract.training import TrainingSpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import ATTENTION_KERNELS
from padbench.worker.engine.data.batches import Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.parallel.sharding import decoder_layers
from padbench.worker.engine.training.features import (
    AppliedTraining,
    TrainingUnsupported,
    apply_training,
    training_refusal,
)
from padbench.worker.engine.training.loss import resolve_loss
from padbench.worker.engine.training.steps import make_optimizer, next_token_labels, training_step
from padbench.worker.jobs.padding.job import run_padding_job
from padbench.worker.jobs.padding.probe.child import probed_model
from padbench.worker.jobs.padding.probe.trials import probe_request
from padbench.worker.runtime.isolation import SpecProblem

CPU = torch.device("cpu")
LENGTHS = (7, 3, 12, 9)


def tiny(training: dict[str, Any], preset: str = "tiny-llama") -> tuple[torch.nn.Module, AppliedTraining]:
    model = build_model(ModelSpec(preset=preset), torch.float32, CPU, seed=3)
    spec = TrainingSpec.model_validate(training)
    apply_training(model, spec, "fp32", CPU, torch.float32)
    return model, AppliedTraining.of(model, spec, "fp32")


def sequences() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(1, 500, (length,), generator=generator) for length in LENGTHS]


def padded_batch() -> PaddedBatch:
    seqs = sequences()
    input_ids = torch.zeros(len(seqs), max(LENGTHS), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, seq in enumerate(seqs):
        input_ids[row, :len(seq)], attention_mask[row, :len(seq)] = seq, 1
    return PaddedBatch(input_ids, attention_mask, LENGTHS, tuple(range(len(seqs))))


def packed_batch() -> PackedBatch:
    cu_seqlens = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    position_ids = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    return PackedBatch(input_ids=torch.cat(sequences())[None], position_ids=position_ids, cu_seqlens=cu_seqlens,
                       max_seqlen=max(LENGTHS), lengths=LENGTHS, sequence_ids=tuple(range(len(LENGTHS))),
                       token_budget=sum(LENGTHS))


def kernel_loss(model: torch.nn.Module, kernel_name: str, batch: Batch) -> torch.Tensor:
    kernel = ATTENTION_KERNELS.get(kernel_name)
    prepared = kernel.prepare(batch)
    logits = kernel.forward(model, prepared)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), next_token_labels(batch).reshape(-1))


# --- LoRA -------------------------------------------------------------------------------------------------

def test_lora_trains_only_its_adapters() -> None:
    model, applied = tiny({"method": "lora", "lora": {"r": 4, "target_modules": "all-linear"}})
    adapters = {name: parameter for name, parameter in model.named_parameters() if "lora_" in name}
    # tiny-llama: 2 layers × 7 linear maps (q, k, v, o, gate, up, down), each with an A and a B matrix
    assert len(adapters) == 2 * 7 * 2
    assert applied.trainable_parameters == sum(parameter.numel() for parameter in adapters.values())
    assert applied.total_parameters == sum(parameter.numel() for parameter in model.parameters())
    assert {name for name, parameter in model.named_parameters() if parameter.requires_grad} == set(adapters)
    optimizer = make_optimizer(model)
    assert sum(len(group["params"]) for group in optimizer.param_groups) == len(adapters)
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    batch = padded_batch()
    model.train()
    training_step(model, ATTENTION_KERNELS.get("sdpa").forward, [batch], [next_token_labels(batch)], optimizer,
                  resolve_loss("fused", torch.device("cpu")))(0)
    changed = {name for name, parameter in model.named_parameters() if not torch.equal(parameter, before[name])}
    assert changed and changed <= set(adapters)  # every base weight as it was
    assert any("lora_B" in name for name in changed)  # B starts at zero: the first step moves it


def test_lora_targets_the_named_modules_and_refuses_names_the_model_lacks() -> None:
    model, _ = tiny({"method": "lora", "lora": {"r": 2, "target_modules": ["q_proj", "v_proj"]}})
    adapted = {name.split(".lora_")[0] for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert {name.rsplit(".", 1)[1] for name in adapted} == {"q_proj", "v_proj"}
    with pytest.raises(SpecProblem, match=r"training\.lora\.target_modules \['no_such_layer'\]: .*not found"):
        tiny({"method": "lora", "lora": {"target_modules": ["no_such_layer"]}})


def test_lora_adapts_gpt2_conv1d_layers() -> None:
    _, applied = tiny({"method": "lora", "lora": {"r": 2}}, preset="tiny-gpt2")
    # tiny-gpt2: 2 blocks × 4 Conv1D maps (c_attn, attn c_proj, c_fc, mlp c_proj)
    assert 0 < applied.trainable_parameters < applied.total_parameters


# --- activation checkpointing ---------------------------------------------------------------------------

def saved_tensor_bytes(model: torch.nn.Module, batch: Batch) -> int:
    """Bytes of the tensors autograd keeps from the forward for the backward (deterministic, unlike a peak)."""
    saved: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        kernel_loss(model, "sdpa", batch)
    return sum(saved)


def test_checkpointing_keeps_fewer_activations() -> None:
    kept = {}
    for choice in ("none", "selective", "full"):
        model, applied = tiny({"activation_checkpointing": choice})
        assert applied.checkpointed_layers == {"none": 0, "selective": 1, "full": 2}[choice]
        model.train()
        kept[choice] = saved_tensor_bytes(model, padded_batch())
    assert kept["full"] < kept["selective"] < kept["none"]


@pytest.mark.parametrize(("kernel_name", "batch"), [("sdpa", padded_batch()), ("sdpa-block-mask", packed_batch())])
@pytest.mark.parametrize("method", ["full", "lora"])
def test_checkpointed_layers_recompute_through_the_kernel(kernel_name: str, batch: Batch, method: str) -> None:
    """The recompute runs in the backward, after the kernel's forward has returned: it must run the same
    kernel with the same `padbench_*` inputs, or torch finds different tensors saved and refuses."""
    gradients = []
    for choice in ("none", "full", "ops"):
        model, _ = tiny({"activation_checkpointing": choice, "method": method})
        model.train()
        kernel_loss(model, kernel_name, batch).backward()
        gradients.append({name.replace("._checkpoint_wrapped_module", ""): parameter.grad
                          for name, parameter in model.named_parameters() if parameter.grad is not None})
    plain, *checkpointed = gradients
    assert plain
    for recomputed in checkpointed:
        assert recomputed.keys() == plain.keys()
        for name, gradient in plain.items():
            torch.testing.assert_close(recomputed[name], gradient, rtol=1e-4, atol=1e-6)


class MatmulCount(TorchDispatchMode):
    """Counts the matmuls dispatched while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.matmuls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.matmuls += func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)
        return func(*args, **(kwargs or {}))


def test_ops_checkpointing_recomputes_the_cheap_ops_and_no_matmul() -> None:
    backward_matmuls = {}
    for choice in ("none", "full", "ops"):
        model, applied = tiny({"activation_checkpointing": choice})
        assert applied.checkpointed_layers == {"none": 0, "full": 2, "ops": 2}[choice]
        model.train()
        loss = kernel_loss(model, "sdpa", padded_batch())
        with MatmulCount() as count:
            loss.backward()
        backward_matmuls[choice] = count.matmuls
    assert backward_matmuls["ops"] == backward_matmuls["none"] < backward_matmuls["full"]


def test_sharding_wraps_a_checkpointed_layer_from_outside() -> None:
    model, _ = tiny({"activation_checkpointing": "selective"})
    layers = decoder_layers(model)
    assert [type(layer).__name__ for layer in layers] == ["LlamaDecoderLayer", "CheckpointWrapper"]


# --- refusals -------------------------------------------------------------------------------------------

def without(monkeypatch: pytest.MonkeyPatch, *missing: str) -> None:
    """Make `importlib.util.find_spec` report the named packages as not installed (and the others as they are)."""
    real: Callable[..., Any] = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name in missing else real(name, *args))


def test_fp8_is_refused_on_a_cpu() -> None:
    reason = training_refusal(TrainingSpec(precision="fp8"), CPU, 1)
    assert reason is not None and "training.precision fp8" in reason and "cpu" in reason


def test_fp8_is_refused_before_hopper_and_without_torchao(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "NVIDIA A100")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (8, 0))
    reason = training_refusal(TrainingSpec(precision="fp8"), gpu, 1)
    assert reason is not None and "8.9" in reason and "A100 is 8.0" in reason
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_: (9, 0))
    without(monkeypatch, "torchao")
    reason = training_refusal(TrainingSpec(precision="fp8"), gpu, 1)
    assert reason is not None and "torchao, which is not installed" in reason


def test_fp8_with_adapters_is_refused() -> None:
    reason = training_refusal(TrainingSpec(precision="fp8", method="lora"), CPU, 1)
    assert reason is not None and "training.method lora" in reason


def test_qlora_is_refused_without_bitsandbytes_on_a_cpu_and_on_several_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "bitsandbytes")
    reason = training_refusal(TrainingSpec(method="qlora"), torch.device("cuda", 0), 1)
    assert reason is not None and "training.method qlora" in reason and "bitsandbytes" in reason
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: object())  # every package installed
    cpu = training_refusal(TrainingSpec(method="qlora"), CPU, 1)
    assert cpu is not None and "training.method qlora" in cpu and "cpu" in cpu
    ranks = training_refusal(TrainingSpec(method="qlora"), torch.device("cuda", 0), 2)
    assert ranks is not None and "one GPU" in ranks


def test_lora_is_refused_without_peft(monkeypatch: pytest.MonkeyPatch) -> None:
    without(monkeypatch, "peft")
    reason = training_refusal(TrainingSpec(method="lora"), CPU, 1)
    assert reason is not None and "training.method lora" in reason and "padbench[training]" in reason


def test_a_job_asking_for_fp8_on_a_cpu_fails_before_building_anything() -> None:
    spec = PaddingJobSpec.model_validate({
        "mode": "training", "model": {"preset": "tiny-llama"}, "training": {"precision": "fp8"}, "attention": "sdpa",
        "data": {"source": "synthetic", "max_length": 32, "num_samples": 4}, "dtype": "bf16", "device": "cpu"})
    with pytest.raises(TrainingUnsupported, match=r"training\.precision fp8 .* on cpu"):
        run_padding_job(spec, lambda *_: None)


@pytest.mark.slow
def test_a_lora_job_with_checkpointing_measures_every_layout() -> None:
    spec = PaddingJobSpec.model_validate({
        "mode": "training", "model": {"preset": "tiny-llama"},
        "training": {"method": "lora", "activation_checkpointing": "selective", "lora": {"r": 4}},
        "data": {"source": "synthetic", "max_length": 48, "num_samples": 12, "seed": 2},
        "strategies": ["static", "packed"], "attention": "sdpa", "batch_size": 4, "dtype": "fp32", "device": "cpu",
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 2,
                        "repeats": 1}})
    result = run_padding_job(spec, lambda *_: None)
    assert [row.status for row in result.strategies] == ["ok", "ok"], [row.error for row in result.strategies]


def test_the_oom_probe_builds_the_model_as_the_job_trains_it() -> None:
    spec = PaddingJobSpec.model_validate({
        "mode": "training", "model": {"preset": "tiny-llama"}, "attention": "sdpa", "dtype": "bf16", "device": "cpu",
        "training": {"method": "lora", "activation_checkpointing": "full", "precision": "amp"},
        "batch_size": "auto", "probe": {"cpu_memory_budget_bytes": 2**28}, "data": {"max_length": 64}})
    request = probe_request(spec, spec.strategies[0], "sdpa", "cpu", 4)
    assert request.training == spec.training and request.precision == "amp"
    model = probed_model(request, CPU)
    applied = AppliedTraining.of(model, spec.training, "amp")
    assert applied.checkpointed_layers == 2 and 0 < applied.trainable_parameters < applied.total_parameters
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}  # amp: fp32 weights
