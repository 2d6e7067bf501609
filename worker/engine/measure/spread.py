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
from padbench.contract.student_t import t_quantile_975


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
