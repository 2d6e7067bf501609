"""Durations and horizons as specs write them: a unit or a token count, never a number that could mean either."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from padbench.contract.horizon import RunHorizon
from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingJobSpec


def horizon_of(value: Any) -> RunHorizon | None:
    spec = parse_job_spec({"horizon": value})
    assert isinstance(spec, PaddingJobSpec)
    return spec.horizon


@pytest.mark.parametrize(("written", "meant"), [
    ("2h", RunHorizon(seconds=7200)), ("90m", RunHorizon(seconds=5400)), ("3d", RunHorizon(seconds=259_200)),
    ("5B tokens", RunHorizon(tokens=5 * 10**9)), ("250M tokens", RunHorizon(tokens=250 * 10**6)),
    (10**9, RunHorizon(tokens=10**9)), ("1000 tokens", RunHorizon(tokens=1000)),
])
def test_a_horizon_is_a_duration_with_its_unit_or_a_number_of_tokens(written: Any, meant: RunHorizon) -> None:
    assert horizon_of(written) == meant


@pytest.mark.parametrize("written", ["7200", "soon", "2 weeks", True, 0, "-5h"])
def test_anything_else_is_refused_naming_the_field(written: Any) -> None:
    with pytest.raises(ValidationError, match="horizon"):
        horizon_of(written)


def test_no_horizon_means_a_long_run() -> None:
    assert horizon_of(None) is None
