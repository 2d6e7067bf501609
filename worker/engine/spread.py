"""The spread of a strategy's repeats: min–max, a 95% interval of the mean and the coefficient of variation.

Each repeat is a whole measured run (every batch issued equally often), so its Σ tokens / Σ seconds is one
observation of the strategy's rate. With n repeats the mean's 95% interval is mean ± t(0.975, n − 1) · s/√n,
Student's t because n is small (3 by default) and the standard deviation is estimated from the same repeats.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from padbench.contract.results import Spread

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


def repeat_spread(rates: Sequence[float], cv_threshold: float) -> Spread | None:
    """The spread of the repeats' rates; None for fewer than two (one number has no spread)."""
    if len(rates) < 2:
        return None
    mean = statistics.fmean(rates)
    deviation = statistics.stdev(rates)
    half_width = t_quantile_975(len(rates) - 1) * deviation / math.sqrt(len(rates))
    cv = deviation / mean if mean > 0 else 0.0
    return Spread(
        repeats=len(rates), min_tokens_per_s=min(rates), max_tokens_per_s=max(rates), mean_tokens_per_s=mean,
        ci95_low_tokens_per_s=max(0.0, mean - half_width), ci95_high_tokens_per_s=mean + half_width,
        cv=cv, cv_threshold=cv_threshold, noisy=cv > cv_threshold,
    )
