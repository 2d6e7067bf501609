"""Judging rows of any kind from their repeats: whether two rows are within noise of each other (Welch's
t-test), how sure a ratio is (Fieller's interval), which rows the measurement does not vouch for, and a
kind's verdict as the API serves it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from padbench.contract.results import GpuActivity, JobResultBase, Spread
from padbench.contract.student_t import Moments, means_differ_95, ratio_interval_95

if TYPE_CHECKING:
    from padbench.contract.api import VerdictOut
    from padbench.report.ranking import RankBy


NOISE_REASON = "their repeats do not tell them from the fastest (Welch's t-test, 5%)"


def compact_rate(rate: float) -> str:
    """Three significant figures with a k/M suffix: 1.28M, 210k, 3.41k, 950."""
    for suffix, scale in (("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.3g}{suffix}"
    return f"{rate:.3g}"


class Vetted(Protocol):
    """What the verdict reads of a row of any kind to judge it: status, the repeats' spread, the GPU's activity."""

    @property
    def status(self) -> str: ...

    @property
    def spread(self) -> Spread | None: ...

    @property
    def gpu_activity(self) -> GpuActivity | None: ...


def moments(row: Vetted) -> Moments | None:
    spread = row.spread
    return None if spread is None else (spread.mean_tokens_per_s, spread.cv, spread.repeats)


def within_noise(a: Vetted, b: Vetted) -> bool:
    """True when the repeats cannot tell the two rows' mean rates apart (`means_differ_95`, Welch's t-test); rows
    without an interval are never within noise."""
    first, second = moments(a), moments(b)
    return first is not None and second is not None and not means_differ_95(first, second)


def is_doubtful(row: Vetted) -> bool:
    """A row not to rank by: invalid or failed, or its repeats noisy, or timed beside another GPU process."""
    noisy = row.spread is not None and row.spread.noisy
    contended = row.gpu_activity is not None and row.gpu_activity.contended
    return row.status != "ok" or noisy or contended


def is_excluded(row: Vetted) -> bool:
    activity = row.gpu_activity
    return activity is not None and activity.contended and not activity.contention_allowed


def ratio_interval(top: Vetted, base: Vetted) -> str:
    """How sure the ratio of two rows' figures is, to follow it: `, 95% interval 4.80–5.20×` (Fieller's interval
    of the ratio of their mean rates, `ratio_interval_95`)."""
    first, second = moments(top), moments(base)
    bounds = None if first is None or second is None else ratio_interval_95(first, second)
    if bounds is None:
        return ", no interval with a single repeat"
    if math.isinf(bounds[1]):
        return f", 95% interval from {bounds[0]:.2f}×, no upper bound: the base's repeats do not tell its mean from 0"
    return f", 95% interval {bounds[0]:.2f}–{bounds[1]:.2f}×"


def verdict_out(result: JobResultBase, rank_by: RankBy = "speed") -> VerdictOut:
    """The verdict as the API serves it, ranked by speed or cost (`padbench.report.ranking`), rows named by their
    index in the result's rows; kinds that rank no rows (an attention sweep) have none."""
    # Imported here, not with the module: the API's bodies build the union of the job kinds registered
    # when they are first imported, and reports are imported while a plugin kind may still be registering.
    from padbench.contract.api import VerdictOut
    from padbench.report.ranking import ranked_verdict
    verdict = ranked_verdict(result, rank_by)
    if verdict is None:
        return VerdictOut()
    index = {id(row): position for position, row in enumerate(verdict.rows)}
    return VerdictOut(lines=verdict.lines, summary=verdict.summary,
                      winner=None if verdict.winner is None else index[id(verdict.winner)],
                      ranked=[index[id(row)] for row in verdict.ranked],
                      doubtful=[position for position, row in enumerate(verdict.rows) if is_doubtful(row)])
