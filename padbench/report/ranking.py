"""Which verdict a reader asked for: ranked by speed (the figure the kind compares) or by cost ($ per million
tokens, from the price per GPU-hour the job's worker was given).

Every row of one job runs on the same GPUs at the same price, so a row's cost is that price over its rate:
the cheapest row is the fastest, and two rows are within noise of each other by cost exactly when they are by
speed. Ranking by cost states the same decision in dollars — what the winner's tokens cost, and by how much
less than the runner-up's and static's, with the interval of that ratio. A result without a price, or of a
kind whose rows are no token rate, is ranked by speed, and its verdict says so: a cost is never guessed.
"""

from __future__ import annotations

import math
from typing import Literal

from padbench.contract.results import JobResultBase
from padbench.contract.student_t import ratio_interval_95
from padbench.contract.table import ResultTable
from padbench.report.kind import Verdict
from padbench.report.noise import Vetted, moments

RankBy = Literal["speed", "cost"]
RANKINGS: tuple[RankBy, ...] = ("speed", "cost")
NO_PRICE = "no price known (its worker was given no --price-per-gpu-hour): ranked by speed"
CHEAPEST_REASON = "their repeats do not tell them from the cheapest (Welch's t-test, 5%)"


def cost_ratio_interval(top: Vetted, base: Vetted) -> str:
    """How sure the ratio of two rows' costs is (`top`'s over `base`'s, the inverse of their rates' ratio), to
    follow it: `, 95% interval 0.77–0.83×` (Fieller's interval of the rates' ratio, inverted)."""
    first, second = moments(top), moments(base)
    bounds = None if first is None or second is None else ratio_interval_95(first, second)
    if bounds is None:
        return ", no interval with a single repeat"
    low = 0.0 if math.isinf(bounds[1]) else 1 / bounds[1]
    return f", 95% interval {low:.2f}–{1 / bounds[0]:.2f}×" if bounds[0] > 0 else \
        f", 95% interval from {low:.2f}×, no upper bound: the repeats do not tell the mean rate from 0"


def _by_speed(verdict: Verdict, why: str) -> Verdict:
    return Verdict(lines=[*verdict.lines, f"  {why}"] if verdict.lines else [], summary=verdict.summary,
                   rows=verdict.rows, winner=verdict.winner, ranked=verdict.ranked)


def ranked_verdict(result: JobResultBase, rank_by: RankBy) -> Verdict | None:
    """The kind's verdict ranked as asked; by speed, saying why, where a ranking by cost cannot be made. None:
    the kind ranks no rows (an attention sweep)."""
    from padbench.kinds.record import kind_spec  # the records import the reports, which import this module

    report = kind_spec(result.kind).report
    if report.verdict is None:
        return None
    if rank_by == "speed":
        return report.verdict(result)
    if report.cost_verdict is None:
        return _by_speed(report.verdict(result), f"{report.plural} have no cost per token to rank by: ranked by speed")
    by_cost = report.cost_verdict(result)
    return by_cost if by_cost is not None else _by_speed(report.verdict(result), NO_PRICE)


def ranked_table(table: ResultTable, result: JobResultBase, rank_by: RankBy) -> ResultTable:
    """The kind's table with its verdict ranked as asked (the rows' order and marks are the same either way: the
    cheapest row of a job is its fastest)."""
    verdict = None if rank_by == "speed" else ranked_verdict(result, rank_by)
    return table if verdict is None else table.model_copy(update={"verdict": verdict.lines})
