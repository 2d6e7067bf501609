"""Rank targets that look inside a padding job's set-up (the job itself runs through `run_job`)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.jobs.padding.job import prepare_job
from padbench.worker.runtime.device import resolve_device
from padbench.worker.runtime.isolation import ChildContext


def first_training_loss(ctx: ChildContext, spec_document: dict[str, Any], tokens: list[list[int]]) -> float:
    """The loss of the job's model, as the job sets it up on this rank (sharded or not), on `tokens`: the
    same rows on every rank, so every rank must see the loss one process sees."""
    spec = PaddingJobSpec.model_validate(spec_document)
    ranks = Ranks.of_environment()
    ranks.join(ranks.device(resolve_device(spec.device)), 60)
    job = prepare_job(spec, lambda *_: None, ranks)
    ids = torch.tensor(tokens, device=job.device)
    with torch.autocast(job.device.type, dtype=job.dtype, enabled=job.autocast):
        logits = job.model(input_ids=ids).logits
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
    loss.backward()  # the gradients' reduce-scatter runs too: a sharded backward must not hang
    return float(loss.detach())


def sharded_from_shapes(ctx: ChildContext, preset: str, tokens: list[list[int]]) -> dict[str, Any]:
    """A model built sharded from its shapes on every rank (as one too large for a GPU is): its weights are
    initialised (no NaN, the head included) and its first loss is that of random weights."""
    from padbench.contract.model_spec import ModelSpec
    from padbench.worker.engine.parallel.sharding import build_sharded

    ranks = Ranks.of_environment()
    device = torch.device("cpu")
    ranks.join(device, 60)
    model = build_sharded(ModelSpec(preset=preset), torch.float32, device, 0, ranks, None)
    finite = all(bool(torch.isfinite(parameter.full_tensor()).all()) for parameter in model.parameters())
    ids = torch.tensor(tokens)
    with torch.no_grad():
        loss = model(input_ids=ids, labels=ids).loss
    return {"finite": finite, "loss": float(loss), "vocab": model.config.vocab_size}


def fused_against_full(ctx: ChildContext, spec_document: dict[str, Any], tokens: list[list[int]]) -> dict[str, float]:
    """One training step's loss and this rank's gradient shards under the fused loss and under the full logits,
    on the job's model as the job sets it up (sharded with FSDP2 on several ranks): how far apart they are."""
    from torch.distributed.tensor import DTensor

    from padbench.worker.engine.attention import resolve_kernel
    from padbench.worker.engine.data.batches import PaddedBatch
    from padbench.worker.engine.training.loss import ChunkedLoss, FullLogitsLoss, TrainingLoss
    from padbench.worker.engine.training.steps import next_token_labels

    spec = PaddingJobSpec.model_validate(spec_document)
    ranks = Ranks.of_environment()
    ranks.join(ranks.device(resolve_device(spec.device)), 60)
    job = prepare_job(spec, lambda *_: None, ranks)
    ids = torch.tensor(tokens, device=job.device)
    batch = PaddedBatch(input_ids=ids, attention_mask=torch.ones_like(ids), lengths=(ids.shape[1],) * ids.shape[0],
                        sequence_ids=tuple(range(ids.shape[0])))
    kernel = resolve_kernel(spec.attention, PaddedBatch, job.device, job.dtype)

    def gradients(loss: TrainingLoss) -> tuple[float, list[torch.Tensor]]:
        with torch.autocast(job.device.type, dtype=job.dtype, enabled=job.autocast):
            value = loss(job.model, kernel.forward, batch, next_token_labels(batch))
        value.backward()
        grads = [parameter.grad for parameter in job.model.parameters() if parameter.grad is not None]
        shards = [(grad.to_local() if isinstance(grad, DTensor) else grad).clone() for grad in grads]
        job.model.zero_grad(set_to_none=True)
        return float(value.detach()), shards

    full_loss, full = gradients(FullLogitsLoss())
    fused_loss, fused = gradients(ChunkedLoss())
    error = max(float((a - b).norm() / b.norm().clamp_min(1e-12)) for a, b in zip(fused, full, strict=True))
    return {"loss_error": abs(fused_loss - full_loss) / full_loss, "gradient_error": error, "loss": fused_loss}


def compiled_against_eager(ctx: ChildContext, spec_document: dict[str, Any], tokens: list[list[int]],
                           backend: str) -> dict[str, float]:
    """One training step's loss and this rank's gradient shards with the job's decoder layers eager, then
    compiled in place (`backend`: AOTAutograd traces forward and backward as inductor's does, without its code
    generation), on the model as the job sets it up (sharded with FSDP2 on several ranks): how far apart."""
    from torch.distributed.tensor import DTensor

    from padbench.worker.engine.training import steps
    from padbench.worker.engine.training.compilation import compile_layers

    spec = PaddingJobSpec.model_validate(spec_document)
    ranks = Ranks.of_environment()
    ranks.join(ranks.device(resolve_device(spec.device)), 60)
    job = prepare_job(spec, lambda *_: None, ranks)
    ids = torch.tensor(tokens, device=job.device)

    def gradients() -> tuple[float, list[torch.Tensor]]:
        logits = job.model(input_ids=ids).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        loss.backward()
        grads = [parameter.grad for parameter in job.model.parameters() if parameter.grad is not None]
        shards = [(grad.to_local() if isinstance(grad, DTensor) else grad).clone() for grad in grads]
        job.model.zero_grad(set_to_none=True)
        return float(loss.detach()), shards

    eager_loss, eager = gradients()
    steps.COMPILE_BACKEND = backend
    compiled_count = compile_layers(job.model)
    compiled_loss, compiled = gradients()
    error = max(float((a - b).norm() / b.norm().clamp_min(1e-12)) for a, b in zip(compiled, eager, strict=True))
    return {"loss_error": abs(compiled_loss - eager_loss) / eager_loss, "gradient_error": error,
            "layers": compiled_count, "gradients": len(compiled)}


def run_job_compiling_with(ctx: ChildContext, spec_text: str, backend: str) -> dict[str, Any]:
    """The job as `run_job` runs it, its compiled rows built with dynamo's `backend` instead of inductor."""
    from padbench.worker.engine.training import steps
    from padbench.worker.jobs import run_job

    steps.COMPILE_BACKEND = backend
    return run_job(ctx, spec_text)
