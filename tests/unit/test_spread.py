"""The worker's t table against scipy.stats.t, for every number of degrees of freedom a row's repeats give."""

from __future__ import annotations

import pytest
from scipy.stats import t

from padbench.contract.bounds import MAX_REPEATS
from padbench.worker.engine.spread import t_quantile_975


@pytest.mark.parametrize("degrees_of_freedom", range(1, MAX_REPEATS))
def test_the_t_table_matches_scipy_to_its_three_decimals(degrees_of_freedom: int) -> None:
    assert t_quantile_975(degrees_of_freedom) == pytest.approx(t.ppf(0.975, degrees_of_freedom), abs=5e-4)


def test_past_the_table_the_normal_quantile_is_within_one_and_a_half_percent() -> None:
    assert t_quantile_975(MAX_REPEATS) == pytest.approx(t.ppf(0.975, MAX_REPEATS), rel=0.015)
