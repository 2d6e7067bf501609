"""Which batches a row warms up on: every shape it will step, and none it will not."""

from __future__ import annotations

import torch

from padbench.contract.spec import MeasurementSpec
from padbench.worker.engine.attention import resolve_kernel
from padbench.worker.engine.data.batches import PaddedBatch
from padbench.worker.engine.parallel.ranks import ONE_RANK
from padbench.worker.jobs.padding.warmups import row_warmup, stepped_batches, with_every_shape


def batches_of_widths(widths: list[int]) -> list[PaddedBatch]:
    return [PaddedBatch(input_ids=torch.ones(2, width, dtype=torch.long),
                        attention_mask=torch.ones(2, width, dtype=torch.long), sequence_ids=(0, 1),
                        lengths=(width, width)) for width in widths]


# Ten batches, a new width every other one: 64, 64, 128, 128, ..., 320.
BATCHES = batches_of_widths([64 * (1 + index // 2) for index in range(10)])


def test_an_uncapped_row_warms_up_on_every_shape() -> None:
    settings = MeasurementSpec(warmup_batches=1, min_seconds=0.0, min_batches=1)
    assert stepped_batches(BATCHES, settings) == BATCHES
    assert with_every_shape([0], BATCHES, settings, ONE_RANK) == [0, 2, 4, 6, 8]


def test_a_capped_row_warms_up_only_on_the_shapes_it_steps() -> None:
    """A tune's trial measures its first few batches: the shapes after them are never stepped, so warming
    them up would only cost time (on an 8B job sharded over four GPUs, a step each)."""
    settings = MeasurementSpec(warmup_batches=1, min_seconds=0.0, min_batches=4, max_batches=4)
    assert len(stepped_batches(BATCHES, settings)) == 4
    assert with_every_shape([0], BATCHES, settings, ONE_RANK) == [0, 2]


def test_the_steps_after_the_measurement_are_warmed_up_too() -> None:
    """The step split and the collectives profile step the first three batches, whatever max_batches says."""
    settings = MeasurementSpec(warmup_batches=1, min_seconds=0.0, min_batches=1, max_batches=1)
    assert len(stepped_batches(BATCHES, settings)) == 3
    assert with_every_shape([0], BATCHES, settings, ONE_RANK) == [0, 2]


def test_a_row_without_diagnostics_steps_only_its_measured_batches() -> None:
    """A tune's trial skips the step split and the collectives profile, so their batches need no warm-up."""
    settings = MeasurementSpec(warmup_batches=1, min_seconds=0.0, min_batches=1, max_batches=1, diagnostics=False)
    assert len(stepped_batches(BATCHES, settings)) == 1
    assert with_every_shape([0], BATCHES, settings, ONE_RANK) == [0]


def test_a_kernel_compiling_per_shape_warms_up_on_the_stepped_shapes_and_their_extremes() -> None:
    flex = resolve_kernel("flex", PaddedBatch, torch.device("cpu"), torch.float32)
    assert flex.compiles_per_shape
    settings = MeasurementSpec(warmup_batches=2, min_seconds=0.0, min_batches=6, max_batches=6)
    # the first two, then the first of each width among the six stepped (64, 128, 192); the smallest and the
    # largest of the six are among them
    assert row_warmup(flex, BATCHES, settings, ONE_RANK) == [0, 1, 2, 4]
