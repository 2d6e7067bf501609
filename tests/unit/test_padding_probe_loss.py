"""The OOM probe steps with the job's training loss: its request and its cache key name the loss."""

from __future__ import annotations

from typing import Any

import torch

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.attention import ATTENTION_KERNELS
from padbench.worker.engine.data.batches import PackedBatch
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.strategies.worst_case import worst_case_batch
from padbench.worker.engine.training.steps import TrainingStep
from padbench.worker.jobs.padding.probe import child
from padbench.worker.jobs.padding.probe.trials import probe_key, probe_request
from padbench.worker.jobs.probing.protocol import DeviceFacts

FACTS = DeviceFacts(device="cpu", name="cpu", total_bytes=None, driver=None, used_by_others_bytes=None,
                    used_by_others_source=None)


def spec(**overrides: Any) -> PaddingJobSpec:
    return PaddingJobSpec.model_validate({
        "model": {"preset": "tiny-llama"}, "data": {"source": "synthetic", "max_length": 32}, "strategies": ["packed"],
        "attention": "sdpa", "batch_size": "auto", "dtype": "fp32", "device": "cpu",
        "probe": {"cpu_memory_budget_bytes": 2**30}, **overrides})


def test_the_request_and_the_cache_key_carry_the_training_loss() -> None:
    fused, full = spec(mode="training"), spec(mode="training", training={"loss": "full"})
    strategy = fused.strategies[0]
    for document, loss in ((fused, "fused"), (full, "full")):
        training = probe_request(document, strategy, "sdpa-block-mask", "cpu", 2).training
        assert training is not None and training.loss == loss
    keys = {probe_key(document, strategy, "sdpa-block-mask", FACTS).digest() for document in (fused, full)}
    assert len(keys) == 2  # a limit found with the full logits is no answer for the fused loss
    inference = [spec(training={"loss": loss}) for loss in ("fused", "full")]
    assert len({probe_key(document, strategy, "sdpa-block-mask", FACTS).digest() for document in inference}) == 1


def test_the_probe_child_steps_with_the_requested_loss() -> None:
    request = probe_request(spec(mode="training"), spec().strategies[0], "sdpa-block-mask", "cpu", 1)
    model = build_model(request.model, torch.float32, torch.device("cpu"), seed=0)
    kernel = ATTENTION_KERNELS.get(request.kernel)
    batch = kernel.prepare(worst_case_batch(PackedBatch, 1, 32, model.config.vocab_size))
    step = child._step(request, model, kernel, batch)
    assert isinstance(step, TrainingStep) and step.loss.name == "chunked-linear-cross-entropy"
    step(0)
