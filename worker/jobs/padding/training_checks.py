"""What a training row adds to a strategy's run: the loss's correctness gate, and the step's phase split.

The gate runs before anything is timed, on the first of the layout gate's sample batches: a fused loss that
does not match the full logits fails the strategy with the reason (every rank alike). The split is timed
after the measurement, never inside it (padbench.worker.engine.training.step_split).
"""

from __future__ import annotations

from padbench.contract.training import StepSplit
from padbench.worker.engine.data.batches import Batch
from padbench.worker.engine.parallel.sharding import autocast_if
from padbench.worker.engine.training.loss import FusedLoss
from padbench.worker.engine.training.loss_check import check_fused_loss
from padbench.worker.engine.training.step_split import SPLIT_STEPS, mean_split, time_step_phases
from padbench.worker.engine.training.steps import KernelForwardFn, StepFn, TrainingStep, next_token_labels
from padbench.worker.jobs.padding.rank_steps import StrategyFailed
from padbench.worker.jobs.padding.setup import JobSetup


def check_training_loss(job: JobSetup, forward: KernelForwardFn, host_batch: Batch, device_batch: Batch) -> None:
    """StrategyFailed when the job's fused loss does not compute what the full logits do; nothing to check
    for the full logits themselves."""
    loss = job.loss
    if job.spec.mode != "training" or not isinstance(loss, FusedLoss):
        return
    labels = next_token_labels(host_batch).to(job.device)
    with autocast_if(job.autocast, job.device, job.dtype):
        check = check_fused_loss(loss, job.model, forward, device_batch, labels, job.dtype)
    if not job.ranks.all_agree(check.passed):
        raise StrategyFailed(f"loss check: {check.reason or 'failed on another rank'}")


def step_split(job: JobSetup, step: StepFn, batches: int) -> StepSplit | None:
    """A training row's forward / backward / optimizer time per step, the ranks' mean; None for inference.
    Every rank times the same number of steps (their steps meet in collectives)."""
    if not isinstance(step, TrainingStep):
        return None
    mine = time_step_phases(step, [number % batches for number in range(SPLIT_STEPS)], job.device)
    return mean_split(job.ranks.gather(mine))
