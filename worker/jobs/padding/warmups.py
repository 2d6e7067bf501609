"""Which batches a row warms up on before its timing: every compile must land there, never in a measurement.

A graph compiled inside a measurement voids the row (`StrategyRun._recompile_reason`), so the warm-up runs every
batch shape a compile could specialise on. Each rank has batches of its own, so the ranks' warm-ups are made
equally long (`equal_warmup`).
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.contract.spec import MeasurementSpec
from padbench.worker.engine.attention import AttentionKernel
from padbench.worker.engine.data.batches import Batch, extreme_batches, first_of_each_shape
from padbench.worker.engine.measure.timing import warmup_order
from padbench.worker.engine.parallel.ranks import Ranks
from padbench.worker.jobs.padding.rank_steps import equal_warmup


def row_warmup(kernel: AttentionKernel, batches: Sequence[Batch], settings: MeasurementSpec,
               ranks: Ranks) -> list[int]:
    """The first `warmup_batches`, plus what the kernel compiles for.

    A kernel that compiles per batch shape compiles once for each, so the warm-up also runs the first batch of
    every shape. Where a warm-up is asked for, the smallest and largest batches too: dynamo specialises sizes
    of 1 (a last pack of one 128-token block), so a kernel compiling its op with dynamic shapes (flex on packs)
    recompiles there.
    """
    per_shape = first_of_each_shape(batches) if kernel.compiles_per_shape else []
    extremes = extreme_batches(batches) if settings.warmup_batches else []
    return equal_warmup(ranks, warmup_order(len(batches), settings.warmup_batches, per_shape + extremes))


def with_every_shape(warmup: list[int], batches: Sequence[Batch], ranks: Ranks) -> list[int]:
    """`warmup` and the first batch of every shape it misses: a compiled model recompiles for new shapes until
    dynamo has made them dynamic (on an H100, binned training recompiled 4 graphs after a 3-batch warm-up)."""
    return equal_warmup(ranks, warmup + [index for index in first_of_each_shape(batches) if index not in warmup])
