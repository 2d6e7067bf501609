"""The answer a padding table exists for, in words: which layout won, by how much over static, at what batch
size — or that the top rows are within noise of each other — and where each strategy's throughput stops
growing with the batch size.

Computed from the stored rows alone (their spreads and GPU activity), so results stored before the verdict
existed get one too. A row the measurement does not vouch for takes no part: failed and invalid rows, and
rows timed while another process computed on the GPU unless the spec allowed contention.

This is the one place the verdict is decided: the CLI prints `verdict_lines`, and the server hands the same
lines, with the rows to highlight and to dim, to the dashboard (`verdict_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from padbench.contract.spec import MeasurementSpec
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel
from padbench.kinds.padding.scaling import largest_count
from padbench.report.kind import Verdict
from padbench.report.noise import (
    NOISE_REASON,
    compact_rate,
    is_excluded,
    ratio_interval,
    within_noise,
)

if TYPE_CHECKING:
    pass

DEFAULT_NOISE_CV = MeasurementSpec().noise_cv
# A larger batch that gains less than this over a smaller one is not worth its memory: on a quiet GPU the
# intervals shrink to a few hundredths of a percent, so "within noise" alone would call a 0.2% gain growth.
PLATEAU_GAIN = 0.02


def candidates(result: PaddingResult) -> list[StrategyResult]:
    """Rows that may win, fastest first. A layout whose rows attend across documents (wrapped) computes another
    function than the rest, so it is never named the winner of a comparison of layouts. A scaling axis is judged
    at its largest GPU count: its other rows are the same layouts on fewer GPUs, which its scaling lines compare."""
    top_count = largest_count(result)
    rows = [row for row in result.strategies if row.status == "ok" and row.tokens_per_s is not None
            and not is_excluded(row) and not row.crosses_documents
            and (row.scaling is None or row.scaling.gpus == top_count)]
    return sorted(rows, key=lambda row: row.tokens_per_s or 0.0, reverse=True)


def winner(result: PaddingResult) -> StrategyResult | None:
    ranked = candidates(result)
    return ranked[0] if ranked else None


def tied_with_top(ranked: list[StrategyResult]) -> list[StrategyResult]:
    """The candidates (fastest first) the repeats cannot tell from the fastest one."""
    return [row for row in ranked[1:] if within_noise(ranked[0], row)]


def describe(row: StrategyResult) -> str:
    if row.batch_tiers is not None and len(row.batch_tiers) > 1:
        sizes = [tier.batch_size for tier in row.batch_tiers]
        return f"{row.label} / {row.kernel} at auto:{row.auto_times} batches {min(sizes)}–{max(sizes)}"
    size = "auto-probed " if row.probe is not None else ""
    return f"{row.label} / {compare_kernel(row)} at {size}batch {row.batch_size}"


def _times(top: StrategyResult, base: StrategyResult, name: str) -> str:
    """`1.08× static (static / torch-flash at batch 64), 95% interval 1.03–1.14×`."""
    assert top.tokens_per_s is not None and base.tokens_per_s is not None
    return f"{top.tokens_per_s / base.tokens_per_s:.2f}× {name} ({describe(base)})" + ratio_interval(top, base)


def verdict_lines(result: PaddingResult) -> list[str]:
    ranked = candidates(result)
    excluded = sum(1 for row in result.strategies if is_excluded(row))
    lines = []
    if not ranked:
        if excluded:
            lines.append(f"verdict: none — every measured row ran beside another process on the GPU ({excluded} "
                         "contended row(s) left out; measurement.allow_contention keeps them)")
        else:
            lines.append("verdict: none — no row was validly measured")
        return lines + _cross_document_lines(result, None)
    top = ranked[0]
    assert top.tokens_per_s is not None
    tied = tied_with_top(ranked)
    if tied:
        names = ", ".join(f"{describe(row)} ({compact_rate(row.tokens_per_s or 0.0)})" for row in tied)
        lines.append(f"verdict: within noise — {describe(top)} ({compact_rate(top.tokens_per_s)} tokens/s), "
                     f"{names}: {NOISE_REASON}")
    else:
        lines.append(f"verdict: winner {describe(top)}: {compact_rate(top.tokens_per_s)} tokens/s")
        if len(ranked) > 1 and ranked[1].strategy != "static":  # a static runner-up's ratio follows anyway
            lines.append(f"  margin: {_times(top, ranked[1], 'the runner-up')}")
    statics = [row for row in ranked if row.strategy == "static"]
    if top.strategy != "static" and statics:
        lines.append(f"  speed-up: {_times(top, statics[0], 'static')}")
    elif top.strategy != "static":
        lines.append("  speed-up: no valid static row to compare with")
    if top.spread is None:
        lines.append("  one repeat per row: no interval; measurement.repeats ≥ 2 gives one")
    elif top.spread.noisy:
        lines.append(f"  the winner's repeats are noisy (CV {top.spread.cv:.1%} > {top.spread.cv_threshold:.0%})")
    if excluded:
        lines.append(f"  {excluded} contended row(s) left out (measurement.allow_contention is false)")
    return lines + _cross_document_lines(result, statics[0] if statics else None)


def _cross_document_lines(result: PaddingResult, static: StrategyResult | None) -> list[str]:
    """Rows left out of the ranking because they compute another function, with their own figure."""
    lines = []
    for row in result.strategies:
        if row.crosses_documents and row.status == "ok" and row.tokens_per_s is not None:
            versus = f", {row.tokens_per_s / static.tokens_per_s:.2f}× static" if static and static.tokens_per_s else ""
            lines.append(f"  not ranked: {describe(row)} ({compact_rate(row.tokens_per_s)} tokens/s{versus}) — its "
                         "rows attend across documents, another function than the ranked layouts")
    return lines


def summary(result: PaddingResult) -> str | None:
    """The verdict in a few words, for a list of jobs: the winner and its rate, or the rows within noise."""
    ranked = candidates(result)
    if not ranked:
        return None
    top, tied = ranked[0], tied_with_top(ranked)
    if tied:
        return "within noise: " + ", ".join(f"{row.label} / {compare_kernel(row)}" for row in [top, *tied])
    return f"{top.label} / {compare_kernel(top)}: {compact_rate(top.tokens_per_s or 0.0)} tokens/s"


def padding_verdict(result: PaddingResult) -> Verdict:
    return Verdict(lines=verdict_lines(result), summary=summary(result), rows=result.strategies,
                   winner=winner(result), ranked=ranked_rows(result.strategies))


@dataclass(frozen=True)
class Curve:
    """One strategy and kernel measured at several batch sizes, smallest first."""

    name: str
    points: tuple[StrategyResult, ...]

    @property
    def measured(self) -> list[StrategyResult]:
        return [row for row in self.points if row.status == "ok" and row.tokens_per_s is not None]

    def plateau(self) -> StrategyResult | None:
        """The smallest size within noise of the best, or short of it by less than matters: where it stops
        growing."""
        measured = self.measured
        if not measured:
            return None
        best = max(measured, key=lambda row: row.tokens_per_s or 0.0)
        for row in measured:
            if row is best or within_noise(row, best) or \
                    (row.tokens_per_s or 0.0) >= (best.tokens_per_s or 0.0) * (1 - _tolerated_shortfall(row, best)):
                return row
        return best


def _tolerated_shortfall(row: StrategyResult, best: StrategyResult) -> float:
    """PLATEAU_GAIN, or without intervals (a single repeat) the noise threshold where that is larger."""
    if row.spread is not None and best.spread is not None:
        return PLATEAU_GAIN
    spread = row.spread or best.spread
    return max(PLATEAU_GAIN, spread.cv_threshold if spread is not None else DEFAULT_NOISE_CV)


def curves(result: PaddingResult) -> list[Curve]:
    groups: dict[str, list[StrategyResult]] = {}
    for row in result.strategies:
        experts = f" · {row.experts}" if row.experts else ""  # a mixture's curve per experts implementation
        groups.setdefault(f"{row.label} / {row.attention}{experts}", []).append(row)
    return [Curve(name, tuple(sorted(rows, key=lambda row: row.batch_size or 0)))
            for name, rows in groups.items() if len({row.batch_size for row in rows}) > 1]


def _point(row: StrategyResult) -> str:
    size = "auto" if row.batch_size is None else f"{row.batch_size}{' (auto)' if row.probe is not None else ''}"
    rate = compact_rate(row.tokens_per_s) if row.tokens_per_s is not None else row.status
    return f"{size} → {rate}"


def curve_lines(result: PaddingResult) -> list[str]:
    lines = []
    for curve in curves(result):
        points = " · ".join(_point(row) for row in curve.points)
        plateau = curve.plateau()
        lines.append(f"{curve.name}: {points}")
        if plateau is None:
            lines.append("  no size was validly measured")
        elif plateau is curve.measured[-1]:
            lines.append(f"  still growing at the largest size measured ({plateau.batch_size})")
        else:
            lines.append(f"  stops growing at batch {plateau.batch_size}: larger sizes gain less than "
                         f"{PLATEAU_GAIN:.0%} or are within noise of it")
        if any(row.spread is not None and row.spread.noisy for row in curve.points):
            lines.append("  noisy points widen the intervals: more repeats or a longer min_seconds narrow them")
    return lines


def ranked_rows(rows: Sequence[StrategyResult]) -> list[StrategyResult]:
    """Measured rows fastest first, then the rest in their job order: the answer is at the top."""
    return sorted(rows, key=lambda row: (row.tokens_per_s is None, -(row.tokens_per_s or 0.0)))
