"""Which batches a row warms up on before its timing: every compile must land there, never in a measurement.

A graph compiled inside a measurement voids the row (`StrategyRun._recompile_reason`), so the warm-up runs every
batch shape a compile could specialise on among the batches the row will step: every pass of a repeat starts at
the first batch and `max_batches` ends it, so a cap below the row's batches steps only the first ones (a tune's
short trials measure 4 of an 8B job's 58 packs; warming the other shapes cost a step each). Each rank has batches
of its own, so the ranks' warm-ups are made equally long (`equal_warmup`).
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.spec import MeasurementSpec
from padbench.worker.engine.attention import AttentionKernel
from padbench.worker.engine.data.batches import Batch, extreme_batches, first_of_each_shape
from padbench.worker.engine.measure.timing import warmup_order
from padbench.worker.engine.parallel.rank_measure import PROFILED_STEPS
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.engine.training.step_split import SPLIT_STEPS
from padbench.worker.jobs.padding.rank_steps import equal_warmup


def row_warmup(kernel: AttentionKernel, batches: Sequence[Batch], settings: MeasurementSpec,
               ranks: Ranks) -> list[int]:
    """The first `warmup_batches`, plus what the kernel compiles for.

    A kernel that compiles per batch shape compiles once for each, so the warm-up also runs the first batch of
    every shape. Where a warm-up is asked for, the smallest and largest batches too: dynamo specialises sizes
    of 1 (a last pack of one 128-token block), so a kernel compiling its op with dynamic shapes (flex on packs)
    recompiles there.
    """
    stepped = stepped_batches(batches, settings)
    per_shape = first_of_each_shape(stepped) if kernel.compiles_per_shape else []
    extremes = extreme_batches(stepped) if settings.warmup_batches else []
    return equal_warmup(ranks, warmup_order(len(batches), settings.warmup_batches, per_shape + extremes))


def with_every_shape(warmup: list[int], batches: Sequence[Batch], settings: MeasurementSpec,
                     ranks: Ranks) -> list[int]:
    """`warmup` and the first batch of every shape it misses among those the row steps: a compiled model
    recompiles for new shapes until dynamo has made them dynamic (on an H100, binned training recompiled 4
    graphs after a 3-batch warm-up)."""
    shapes = first_of_each_shape(stepped_batches(batches, settings))
    return equal_warmup(ranks, warmup + [index for index in shapes if index not in warmup])


def stepped_batches(batches: Sequence[Batch], settings: MeasurementSpec) -> Sequence[Batch]:
    """The batches a row ever steps, a prefix of them: the repeats' passes start at the first batch and
    `max_batches` caps them; the step split and the collectives profile after the measurement (its
    diagnostics) step the first few too."""
    if settings.max_batches is None:
        return batches
    diagnosed = (SPLIT_STEPS, PROFILED_STEPS) if settings.diagnostics else ()
    return batches[:max((settings.max_batches, *diagnosed))]
