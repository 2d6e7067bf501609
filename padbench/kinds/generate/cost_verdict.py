"""The generate verdict ranked by cost: the same rows decide it as by speed (`padbench.kinds.generate.verdict`),
per context length, stated in $ per million output tokens at the price per GPU-hour the job's worker was given.

Every row of the job ran on the same GPU at the same price, so the cheapest strategy is the fastest
(`padbench.report.ranking`); a result without a price has no cost verdict (None) and is ranked by speed.
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.kinds.generate.contract import GenerateResult, GenerateRow
from padbench.kinds.generate.verdict import (
    candidates,
    contexts,
    describe,
    fastest_reference,
    row_label,
    rows_at,
    summary,
    table_order,
    winner,
)
from padbench.report.efficiency import dollars, priced_as, rate_cost
from padbench.report.kind import Verdict
from padbench.report.noise import compact_rate, is_excluded, within_noise
from padbench.report.ranking import CHEAPEST_REASON, cost_ratio_interval

UNIT = "per million output tokens"


def _cost(result: GenerateResult, row: GenerateRow) -> str:
    cost = rate_cost(result, row.output_tokens_per_s)
    return "no cost" if cost is None else dollars(cost)


def _versus(result: GenerateResult, top: GenerateRow, base: GenerateRow, name: str) -> str:
    """`0.42× static's cost (static / sdpa-kvcache at batch 16: $1.204), 95% interval 0.40–0.44×`."""
    assert top.output_tokens_per_s and base.output_tokens_per_s
    return (f"{base.output_tokens_per_s / top.output_tokens_per_s:.2f}× {name}'s cost ({describe(base)}: "
            f"{_cost(result, base)})" + cost_ratio_interval(top, base))


def _context_lines(result: GenerateResult, rows: Sequence[GenerateRow], where: str) -> list[str]:
    ranked = candidates(rows)
    if not ranked:
        return [f"verdict by cost{where}: none — no strategy row was validly measured"]
    top = ranked[0]
    tied = [row for row in ranked[1:] if within_noise(top, row)]
    if tied:
        names = ", ".join(f"{describe(row)} ({_cost(result, row)})" for row in tied)
        return [f"verdict by cost{where}: within noise — {describe(top)} ({_cost(result, top)} {UNIT}), {names}: "
                + CHEAPEST_REASON]
    lines = [f"verdict by cost{where}: cheapest {describe(top)}: {_cost(result, top)} {UNIT} "
             f"({compact_rate(top.output_tokens_per_s or 0.0)} output tokens/s)"]
    if len(ranked) > 1 and ranked[1].strategy != "static":
        lines.append(f"  margin: {_versus(result, top, ranked[1], 'the runner-up')}")
    statics = [row for row in ranked if row.strategy == "static"]
    if top.strategy != "static" and statics:
        lines.append(f"  saving: {_versus(result, top, statics[0], 'static')}")
    reference = fastest_reference(rows)
    if reference is not None:
        lines.append(f"  vs the fastest reference: {_versus(result, top, reference, 'the reference')}")
    return lines


def cost_verdict_lines(result: GenerateResult) -> list[str] | None:
    """The verdict by cost per context length; None without a price or a measured row (ranked by speed then)."""
    if rate_cost(result, 1.0) is None or not result.rows:
        return None
    lines = [line for context in contexts(result)
             for line in _context_lines(result, rows_at(result, context),
                                        "" if context is None else f" at context {context:,}")]
    lines.append(f"  priced at {priced_as(result)}, every row on the same GPU: the cheapest row is the fastest")
    excluded = sum(1 for row in result.rows if is_excluded(row))
    if excluded:
        lines.append(f"  {excluded} contended row(s) left out (measurement.allow_contention is false)")
    return lines


def cost_summary(result: GenerateResult) -> str | None:
    """The first context's verdict by cost in a few words, for a list of jobs (as `summary` says it by speed)."""
    top = winner(result)
    if top is None or summary(result) is None or "within noise" in (summary(result) or ""):
        return summary(result)
    return f"{row_label(top)} / {top.kernel}: {_cost(result, top)}/M output tokens"


def generate_cost_verdict(result: GenerateResult) -> Verdict | None:
    lines = cost_verdict_lines(result)
    if lines is None:
        return None
    return Verdict(lines=lines, summary=cost_summary(result), rows=result.rows, winner=winner(result),
                   ranked=table_order(result))
