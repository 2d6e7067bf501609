"""The padding verdict ranked by cost: the same rows decide it as by speed (`padbench.kinds.padding.verdict`),
stated in $ per million real tokens at the price per GPU-hour the job's worker was given — what the winner's
tokens cost, and how much less than the runner-up's and static's, with the interval of that ratio.

Every row of the job ran on the same GPUs at the same price, so the cheapest row is the fastest
(`padbench.report.ranking`); a result without a price has no cost verdict (None) and is ranked by speed.
"""

from __future__ import annotations

from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel
from padbench.kinds.padding.verdict import (
    candidates,
    describe,
    ranked_rows,
    summary,
    tied_with_top,
    verdict_lines,
    winner,
)
from padbench.report.cost_verdict import RowCosts
from padbench.report.efficiency import priced_as, rate_cost
from padbench.report.kind import Verdict
from padbench.report.noise import is_excluded


def _costs(result: PaddingResult) -> RowCosts[StrategyResult]:
    """A scaling axis row is priced on its own GPU count."""
    return RowCosts(result, rate=lambda row: row.tokens_per_s, describe=describe, unit="per million tokens",
                    rate_unit="tokens/s", gpus=lambda row: row.scaling.gpus if row.scaling else None)


def cost_verdict_lines(result: PaddingResult) -> list[str] | None:
    """The verdict by cost; None without a price (ranked by speed then)."""
    if rate_cost(result, 1.0) is None:
        return None
    ranked = candidates(result)
    if not ranked:  # no row to price: the speed verdict says why
        return verdict_lines(result)
    costs, top, tied = _costs(result), ranked[0], tied_with_top(ranked)
    lines = [costs.within_noise_line(top, tied) if tied else costs.cheapest_line(top),
             *costs.comparisons(ranked, margin=not tied)]  # static's ratio even where the top rows are tied
    lines.append(f"  priced at {priced_as(result)}, every row on the same GPUs: the cheapest row is the fastest")
    if top.spread is None:
        lines.append("  one repeat per row: no interval; measurement.repeats ≥ 2 gives one")
    excluded = sum(1 for row in result.strategies if is_excluded(row))
    if excluded:
        lines.append(f"  {excluded} contended row(s) left out (measurement.allow_contention is false)")
    return lines


def cost_summary(result: PaddingResult) -> str | None:
    """The verdict by cost in a few words, for a list of jobs; rows within noise are named as by speed."""
    ranked = candidates(result)
    if not ranked or tied_with_top(ranked):
        return summary(result)
    return f"{ranked[0].label} / {compare_kernel(ranked[0])}: {_costs(result).cost(ranked[0])}/M tokens"


def padding_cost_verdict(result: PaddingResult) -> Verdict | None:
    lines = cost_verdict_lines(result)
    if lines is None:
        return None
    return Verdict(lines=lines, summary=cost_summary(result), rows=result.strategies, winner=winner(result),
                   ranked=ranked_rows(result.strategies))
