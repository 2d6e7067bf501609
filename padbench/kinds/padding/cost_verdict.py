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
from padbench.report.efficiency import dollars, priced_as, rate_cost
from padbench.report.kind import Verdict
from padbench.report.noise import compact_rate, is_excluded
from padbench.report.ranking import CHEAPEST_REASON, cost_ratio_interval


def _cost(result: PaddingResult, row: StrategyResult) -> str:
    cost = rate_cost(result, row.tokens_per_s, row.scaling.gpus if row.scaling else None)
    return "no cost" if cost is None else dollars(cost)


def _versus(result: PaddingResult, top: StrategyResult, base: StrategyResult, name: str) -> str:
    """`0.80× the runner-up's cost (dynamic / sdpa at batch 8: $0.3412), 95% interval 0.77–0.83×`."""
    assert top.tokens_per_s and base.tokens_per_s
    return (f"{base.tokens_per_s / top.tokens_per_s:.2f}× {name}'s cost ({describe(base)}: {_cost(result, base)})"
            + cost_ratio_interval(top, base))


def cost_verdict_lines(result: PaddingResult) -> list[str] | None:
    """The verdict by cost; None without a price (ranked by speed then)."""
    if rate_cost(result, 1.0) is None:
        return None
    ranked = candidates(result)
    if not ranked:  # no row to price: the speed verdict says why
        return verdict_lines(result)
    top, tied = ranked[0], tied_with_top(ranked)
    if tied:
        names = ", ".join(f"{describe(row)} ({_cost(result, row)})" for row in tied)
        lines = [f"verdict by cost: within noise — {describe(top)} ({_cost(result, top)} per million tokens), "
                 f"{names}: {CHEAPEST_REASON}"]
    else:
        lines = [f"verdict by cost: cheapest {describe(top)}: {_cost(result, top)} per million tokens "
                 f"({compact_rate(top.tokens_per_s or 0.0)} tokens/s)"]
        if len(ranked) > 1 and ranked[1].strategy != "static":  # a static runner-up's ratio follows anyway
            lines.append(f"  margin: {_versus(result, top, ranked[1], 'the runner-up')}")
    statics = [row for row in ranked if row.strategy == "static"]
    if top.strategy != "static" and statics:
        lines.append(f"  saving: {_versus(result, top, statics[0], 'static')}")
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
    return f"{ranked[0].label} / {compare_kernel(ranked[0])}: {_cost(result, ranked[0])}/M tokens"


def padding_cost_verdict(result: PaddingResult) -> Verdict | None:
    lines = cost_verdict_lines(result)
    if lines is None:
        return None
    return Verdict(lines=lines, summary=cost_summary(result), rows=result.strategies, winner=winner(result),
                   ranked=ranked_rows(result.strategies))
