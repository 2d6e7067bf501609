"""Student's t quantiles for 95% intervals: of one row's mean rate (its repeats) and of two rows' ratio.

They belong to the contract because a result's intervals are defined by them: the worker computes each row's,
and the reports compare rows with the same numbers, so a stored result reads the same wherever it is judged.
"""

from __future__ import annotations

import math

# Two-sided 95% quantiles of Student's t, t(0.975, df), to three decimals, for every df a row's repeats give
# (1 to MAX_REPEATS - 1; any statistics table has them, e.g. NIST/SEMATECH e-Handbook of Statistical Methods,
# 1.3.6.7.2, and tests/unit/test_spread.py checks each against scipy.stats.t). Beyond them (never, for a
# checked spec) the normal 1.96 is within 1.5% of t. A table, not scipy: a worker needs no scientific stack
# for 99 numbers.
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
    2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
    2.045, 2.042, 2.040, 2.037, 2.035, 2.032, 2.030, 2.028, 2.026, 2.024, 2.023, 2.021, 2.020, 2.018,
    2.017, 2.015, 2.014, 2.013, 2.012, 2.011, 2.010, 2.009, 2.008, 2.007, 2.006, 2.005, 2.004, 2.003,
    2.002, 2.002, 2.001, 2.000, 2.000, 1.999, 1.998, 1.998, 1.997, 1.997, 1.996, 1.995, 1.995, 1.994,
    1.994, 1.993, 1.993, 1.993, 1.992, 1.992, 1.991, 1.991, 1.990, 1.990, 1.990, 1.989, 1.989, 1.989,
    1.988, 1.988, 1.988, 1.987, 1.987, 1.987, 1.986, 1.986, 1.986, 1.986, 1.985, 1.985, 1.985, 1.984,
    1.984,
)
_NORMAL_975 = 1.96


def t_quantile_975(degrees_of_freedom: int) -> float:
    if degrees_of_freedom < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return _T_975[degrees_of_freedom - 1] if degrees_of_freedom <= len(_T_975) else _NORMAL_975


def t_quantile_975_fractional(degrees_of_freedom: float) -> float:
    """t(0.975) at a fractional df (Welch's): log t interpolated linearly in 1/df between the table's neighbours,
    within 3% of the exact quantile from 1 to 2 degrees of freedom, and always on the wide side there."""
    low, high = math.floor(degrees_of_freedom), math.ceil(degrees_of_freedom)
    if low < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    if low == high or high > len(_T_975):
        return t_quantile_975(low)
    share = (1 / low - 1 / degrees_of_freedom) / (1 / low - 1 / high)
    return math.exp((1 - share) * math.log(t_quantile_975(low)) + share * math.log(t_quantile_975(high)))


# A mean rate and its spread over the repeats: (mean, coefficient of variation, repeats ≥ 2).
Moments = tuple[float, float, int]


def _variance_of_mean(moments: Moments) -> float:
    mean, cv, repeats = moments
    return (mean * cv) ** 2 / repeats


def _welch_t(weighted: tuple[float, float], repeats: tuple[int, int]) -> float:
    """t(0.975) at Welch–Satterthwaite's degrees of freedom for a sum of two means' variances."""
    total = sum(weighted)
    denominator = sum(part ** 2 / (count - 1) for part, count in zip(weighted, repeats, strict=True))
    freedom = total ** 2 / denominator if denominator > 0 else float(min(repeats) - 1)
    return t_quantile_975_fractional(max(1.0, freedom))


def means_differ_95(top: Moments, base: Moments) -> bool:
    """Welch's t-test at the 5% level: whether two means with unequal variances differ.

    This is the test that two rows differ. Asking instead whether each row's own 95% interval misses the other's
    is stricter than 5%: means whose intervals overlap by less than about half a margin still differ at that
    level (Schenker and Gentleman, "On judging the significance of differences by examining the overlap between
    confidence intervals", The American Statistician 55(3), 2001).
    """
    variances = (_variance_of_mean(top), _variance_of_mean(base))
    if sum(variances) == 0:
        return top[0] != base[0]
    return abs(top[0] - base[0]) > _welch_t(variances, (top[2], base[2])) * math.sqrt(sum(variances))


def ratio_interval_95(top: Moments, base: Moments) -> tuple[float, float] | None:
    """The 95% interval of top's mean over base's, by Fieller's theorem: the ratios r for which top − r · base is
    not significantly different from zero (for r = 1, `means_differ_95`'s test). The upper bound is infinite
    where base's mean itself is not distinguishable from zero; None where a mean is not positive.
    """
    (top_mean, _, top_n), (base_mean, _, base_n) = top, base
    if top_mean <= 0 or base_mean <= 0:
        return None
    ratio = top_mean / base_mean
    top_var, base_var = _variance_of_mean(top), _variance_of_mean(base)
    if top_var + base_var == 0:
        return ratio, ratio
    t_squared = _welch_t((top_var, ratio ** 2 * base_var), (top_n, base_n)) ** 2
    # (top − r · base)² = t² (top_var + r² base_var), a quadratic a r² − 2 b r + c = 0 in r.
    a, b, c = base_mean ** 2 - t_squared * base_var, top_mean * base_mean, top_mean ** 2 - t_squared * top_var
    if a <= 0:  # no upper bound; the ratios from the quadratic's positive root up (all, if top's mean may be 0)
        if c <= 0:
            return 0.0, math.inf
        return (c / (2 * b) if a == 0 else (b - math.sqrt(b * b - a * c)) / a), math.inf
    root = math.sqrt(max(0.0, b * b - a * c))
    return max(0.0, (b - root) / a), (b + root) / a
