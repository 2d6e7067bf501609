"""The t table against scipy.stats.t, for every number of degrees of freedom a row's repeats give, and the two-row
test and ratio interval built on it against scipy and their defining equation."""

from __future__ import annotations

import math
import random

import pytest
from scipy.stats import t, ttest_ind_from_stats

from padbench.contract.bounds import MAX_REPEATS
from padbench.contract.student_t import (
    Moments,
    means_differ_95,
    ratio_interval_95,
    t_quantile_975,
    t_quantile_975_fractional,
)


@pytest.mark.parametrize("degrees_of_freedom", range(1, MAX_REPEATS))
def test_the_t_table_matches_scipy_to_its_three_decimals(degrees_of_freedom: int) -> None:
    assert t_quantile_975(degrees_of_freedom) == pytest.approx(t.ppf(0.975, degrees_of_freedom), abs=5e-4)


def test_past_the_table_the_normal_quantile_is_within_one_and_a_half_percent() -> None:
    assert t_quantile_975(MAX_REPEATS) == pytest.approx(t.ppf(0.975, MAX_REPEATS), rel=0.015)


def _draws(seed: int) -> tuple[Moments, Moments]:
    rng = random.Random(seed)
    return tuple((rng.uniform(900, 1100), rng.uniform(0.001, 0.08), rng.randint(2, 8))  # type: ignore[return-value]
                 for _ in range(2))


@pytest.mark.parametrize("degrees_of_freedom", [1.1, 1.3, 1.5, 1.8, 2.5, 3.3, 5.5, 9.7])
def test_fractional_degrees_of_freedom_interpolate_within_three_percent_on_the_wide_side(
        degrees_of_freedom: float) -> None:
    exact = t.ppf(0.975, degrees_of_freedom)
    assert exact * 0.999 <= t_quantile_975_fractional(degrees_of_freedom) <= exact * 1.03


@pytest.mark.parametrize("seed", range(40))
def test_welchs_test_agrees_with_scipy_away_from_its_threshold(seed: int) -> None:
    top, base = _draws(seed)
    p_value = ttest_ind_from_stats(top[0], top[0] * top[1], top[2], base[0], base[0] * base[1], base[2],
                                   equal_var=False).pvalue
    if abs(p_value - 0.05) > 0.005:  # the table interpolates t between whole degrees of freedom
        assert means_differ_95(top, base) == (p_value < 0.05)


@pytest.mark.parametrize("seed", range(40))
def test_fieller_bounds_solve_their_equation_and_hold_the_ratio(seed: int) -> None:
    top, base = _draws(seed)
    low, high = ratio_interval_95(top, base) or (math.nan, math.nan)
    ratio = top[0] / base[0]
    assert low <= ratio <= high
    top_var, base_var = ((m * cv) ** 2 / n for m, cv, n in (top, base))
    weighted = (top_var, ratio ** 2 * base_var)
    freedom = sum(weighted) ** 2 / (weighted[0] ** 2 / (top[2] - 1) + weighted[1] ** 2 / (base[2] - 1))
    for bound in (low, high):
        # At a bound, top − r·base is exactly t standard errors from zero, t at Welch's df for the observed ratio.
        gap = abs(top[0] - bound * base[0]) / math.sqrt(top_var + bound ** 2 * base_var)
        assert gap == pytest.approx(t_quantile_975_fractional(max(1.0, freedom)), rel=1e-6)


def test_a_base_the_repeats_cannot_tell_from_zero_leaves_the_ratio_without_an_upper_bound() -> None:
    low, high = ratio_interval_95((500.0, 0.01, 3), (150.0, 0.88, 3)) or (0.0, 0.0)
    assert math.isinf(high) and 1.0 < low < 500 / 150
    assert ratio_interval_95((0.0, 0.1, 3), (100.0, 0.1, 3)) is None
    assert ratio_interval_95((200.0, 0.0, 3), (100.0, 0.0, 3)) == (2.0, 2.0)
