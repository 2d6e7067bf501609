"""Rank targets that look inside a padding job's set-up (the job itself runs through `run_job`)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from padbench.contract.spec import PaddingJobSpec
from padbench.worker.engine.ranks import Ranks
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
