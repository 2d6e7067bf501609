"""What to change when a row runs out of memory: settings the memory plan estimates would need less and fit.

The allocator's message says how many bytes it failed to find, not what to do. The plan knows the model state
each rank holds (exactly) and estimates the activations a step keeps, so it can name, for the row that ran out,
the least recompute that fits at its batch size, the largest batch that fits at its recompute, or the GPU count
whose shards make room. Only settings the plan estimates below the failed row's own need are named: the row's
own estimate already proved too low.
"""

from __future__ import annotations

import torch

from padbench.contract.spec import StrategySpec
from padbench.contract.training import Checkpointing, concrete_checkpointing
from padbench.contract.units import format_bytes
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.model.step_memory import LEAST_RECOMPUTE_FIRST, StepPlanner

GPU_COUNTS = (2, 4, 8)  # what a job with no room for its model state at batch 1 is pointed to


def with_fitting_settings(error: Exception, spec: PaddingJobSpec, strategy: StrategySpec, batch_size: int, ranks: int,
                          device: torch.device) -> Exception:
    """An out-of-memory error as the allocator's first sentences and what the memory plan says would fit; any
    other error as it is."""
    if not isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return error
    hint = fitting_settings(spec, strategy.widest(spec.data.max_length), batch_size, ranks, device_bytes(spec, device))
    said = ". ".join(str(error).split(". ")[:2]).rstrip(".")
    try:
        return type(error)(f"{said}. {hint}")
    except TypeError:  # an exception type whose constructor takes other arguments
        return RuntimeError(f"{type(error).__name__}: {said}. {hint}")


def device_bytes(spec: PaddingJobSpec, device: torch.device) -> int | None:
    """All the memory a rank's device has (what the row failed to fit in, less other processes)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return spec.probe.cpu_memory_budget_bytes


def fitting_settings(spec: PaddingJobSpec, width: int, batch_size: int, ranks: int, available: int | None) -> str:
    """One sentence naming what would fit by the plan, or that nothing on this many ranks would."""
    if available is None:
        return "no memory limit is known here, so the memory plan cannot say what would fit"
    planner = StepPlanner(spec, ranks)
    level = concrete_checkpointing(spec.training.activation_checkpointing) if spec.mode == "training" else None
    failed = planner.fit(batch_size, level, available, width).needed
    options = [option for option in (_more_recompute(planner, level, batch_size, width, available, failed),
                                     _smaller_batch(planner, level, batch_size, width, available, failed))
               if option is not None]
    if not options:
        options.append(_more_gpus(spec, level, width, available, ranks))
    return (f"by the memory plan, in the {format_bytes(available)} of each device this would fit: "
            + "; or ".join(options) + " (batch_size auto finds the largest batch that fits)")


def _more_recompute(planner: StepPlanner, level: Checkpointing | None, batch_size: int, width: int, available: int,
                    failed: int) -> str | None:
    if level is None:
        return None
    for more in LEAST_RECOMPUTE_FIRST[LEAST_RECOMPUTE_FIRST.index(level) + 1:]:
        fit = planner.fit(batch_size, more, available, width)
        if fit.fits and fit.needed < failed:
            return f"training.activation_checkpointing {more} at batch {batch_size} (est. {format_bytes(fit.needed)})"
    return None


def _smaller_batch(planner: StepPlanner, level: Checkpointing | None, batch_size: int, width: int, available: int,
                   failed: int) -> str | None:
    size = batch_size // 2
    while size >= 1:
        fit = planner.fit(size, level, available, width)
        if fit.fits and fit.needed < failed:
            return f"batch_size {size} (est. {format_bytes(fit.needed)})"
        size //= 2
    return None


def _more_gpus(spec: PaddingJobSpec, level: Checkpointing | None, width: int, available: int, ranks: int) -> str:
    most: Checkpointing | None = "full" if level is not None else None
    for count in (count for count in GPU_COUNTS if count > ranks):
        fit = StepPlanner(spec, count).fit(1, most, available, width)
        if fit.fits:
            return (f"gpus: {count} (sharded, batch 1" + (", full recompute" if most else "")
                    + f": est. {format_bytes(fit.needed)} per GPU)")
    return f"nothing up to {GPU_COUNTS[-1]} GPUs: the model state alone is too large for these devices"
