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
from padbench.report.cost_verdict import RowCosts
from padbench.report.efficiency import priced_as, rate_cost
from padbench.report.kind import Verdict
from padbench.report.noise import is_excluded, within_noise


def _costs(result: GenerateResult) -> RowCosts[GenerateRow]:
    return RowCosts(result, rate=lambda row: row.output_tokens_per_s, describe=describe,
                    unit="per million output tokens", rate_unit="output tokens/s")


def _context_lines(result: GenerateResult, rows: Sequence[GenerateRow], where: str) -> list[str]:
    ranked = candidates(rows)
    if not ranked:
        return [f"verdict by cost{where}: none — no strategy row was validly measured"]
    costs, top = _costs(result), ranked[0]
    tied = [row for row in ranked[1:] if within_noise(top, row)]
    if tied:
        return [costs.within_noise_line(top, tied, where)]
    lines = [costs.cheapest_line(top, where), *costs.comparisons(ranked)]
    reference = fastest_reference(rows)
    if reference is not None:
        lines.append(f"  vs the fastest reference: {costs.versus(top, reference, 'the reference')}")
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
    return f"{row_label(top)} / {top.kernel}: {_costs(result).cost(top)}/M output tokens"


def generate_cost_verdict(result: GenerateResult) -> Verdict | None:
    lines = cost_verdict_lines(result)
    if lines is None:
        return None
    return Verdict(lines=lines, summary=cost_summary(result), rows=result.rows, winner=winner(result),
                   ranked=table_order(result))
