"""Batch sizes in a padding spec: one size, `auto`, or a list of them (a batch-size curve)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from padbench.contract.spec import StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.jobs.padding.auto_batch import expand_axes, needs_probe


def test_a_list_with_auto_expands_to_one_strategy_per_size_in_order() -> None:
    spec = PaddingJobSpec(batch_size=[16, 64, "auto"],
                          strategies=["static", {"name": "packed", "batch_size": [8, 32]}])
    expanded = expand_axes(spec)
    assert [(s.name, s.batch_size) for s in expanded.strategies] == [
        ("static", 16), ("static", 64), ("static", "auto"), ("packed", 8), ("packed", 32)]
    assert needs_probe(expanded) and not needs_probe(expand_axes(PaddingJobSpec(batch_size=[4, 8])))
    assert spec.batch_sizes_for(spec.strategies[0]) == [16, 64, "auto"]
    with pytest.raises(ValueError, match="expand the job per size"):
        spec.batch_size_for(spec.strategies[0])


@pytest.mark.parametrize("value", [0, [], [16, 16], [16, "auto", 0], "big", list(range(1, 18))])
def test_bad_batch_sizes_get_one_clear_error_naming_the_field(value: object) -> None:
    with pytest.raises(ValidationError) as failure:
        PaddingJobSpec(batch_size=value)
    (error,) = failure.value.errors()
    assert error["loc"] == ("batch_size",)
    with pytest.raises(ValidationError):
        StrategySpec(name="static", batch_size=value)


def test_measurement_defaults_to_three_repeats_and_bounds_its_new_settings() -> None:
    measurement = PaddingJobSpec().measurement
    assert measurement.repeats == 3 and measurement.noise_cv == 0.05 and not measurement.allow_contention
    for bad in ({"repeats": 0}, {"repeats": 101}, {"noise_cv": 0}, {"noise_cv": 1.5}):
        with pytest.raises(ValidationError):
            PaddingJobSpec(measurement=bad)
