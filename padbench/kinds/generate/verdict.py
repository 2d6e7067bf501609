"""The answer a generate table exists for, in words: which batching strategy served the requests fastest, by
how much over static batching and over the fastest library reference — or that the top rows are within noise.

The padding verdict's rule, on output tokens/s: a row takes part only when validly measured and not timed
beside another GPU process (unless the spec allowed it); rows whose repeats do not tell them from the
fastest one (Welch's t-test) are within noise of it. Reference rows (transformers' own loops) never win: the
verdict states the winner's ratio to the fastest of them instead. A job with a context table gets a verdict per
context length.
"""

from __future__ import annotations

from collections.abc import Sequence

from padbench.kinds.generate.contract import GenerateResult, GenerateRow
from padbench.report.kind import Verdict
from padbench.report.noise import NOISE_REASON, compact_rate, is_excluded, ratio_interval, within_noise

UNIT = "output tokens/s"


def row_label(row: GenerateRow) -> str:
    """The strategy, or `ref: transformers-generate` for a library's own loop."""
    return f"ref: {row.strategy}" if row.reference else row.strategy


def describe(row: GenerateRow) -> str:
    size = "" if row.batch_size is None else f" at batch {row.batch_size}"
    return f"{row_label(row)} / {row.kernel}{size}"


def _rate(row: GenerateRow) -> float:
    return row.output_tokens_per_s or 0.0


def _counted(row: GenerateRow) -> bool:
    return row.status == "ok" and row.output_tokens_per_s is not None and not is_excluded(row)


def contexts(result: GenerateResult) -> list[int | None]:
    """The context lengths of the rows, shortest first; [None] for a job without a context table."""
    lengths = {row.context for row in result.rows}
    return sorted(lengths, key=lambda length: -1 if length is None else length)


def rows_at(result: GenerateResult, context: int | None) -> list[GenerateRow]:
    return [row for row in result.rows if row.context == context]


def candidates(rows: Sequence[GenerateRow]) -> list[GenerateRow]:
    """Strategy rows that may win, fastest first."""
    return sorted((row for row in rows if not row.reference and _counted(row)), key=_rate, reverse=True)


def fastest_reference(rows: Sequence[GenerateRow]) -> GenerateRow | None:
    references = [row for row in rows if row.reference and _counted(row)]
    return max(references, key=_rate) if references else None


def ranked(rows: Sequence[GenerateRow]) -> list[GenerateRow]:
    """As the table lists them: strategies fastest first, then references fastest first, unmeasured last."""
    def order(row: GenerateRow) -> tuple[bool, bool, float]:
        return row.reference, row.output_tokens_per_s is None, -_rate(row)
    return sorted(rows, key=order)


def table_order(result: GenerateResult) -> list[GenerateRow]:
    return [row for context in contexts(result) for row in ranked(rows_at(result, context))]


def winner(result: GenerateResult) -> GenerateRow | None:
    """The row the table stars: the fastest strategy of the first context length (the only one, mostly)."""
    ranked_candidates = candidates(rows_at(result, contexts(result)[0])) if result.rows else []
    return ranked_candidates[0] if ranked_candidates else None


def _ratio(top: GenerateRow, base: GenerateRow, shown: str) -> str:
    """`2.40× static (static / sdpa-kvcache at batch 16), 95% interval 2.32–2.49×`, and whether that is noise."""
    text = f"{_rate(top) / _rate(base):.2f}× {shown}" + ratio_interval(top, base)
    return text + (" — within noise: the repeats do not tell them apart" if within_noise(top, base) else "")


def _headline(ranked_candidates: list[GenerateRow], where: str) -> str:
    top = ranked_candidates[0]
    tied = [row for row in ranked_candidates[1:] if within_noise(top, row)]
    if tied:
        names = ", ".join(f"{describe(row)} ({compact_rate(_rate(row))})" for row in tied)
        return (f"verdict{where}: within noise — {describe(top)} ({compact_rate(_rate(top))} {UNIT}), {names}: "
                + NOISE_REASON)
    return f"verdict{where}: winner {describe(top)}: {compact_rate(_rate(top))} {UNIT}"


def _context_lines(rows: Sequence[GenerateRow], where: str) -> list[str]:
    ranked_candidates = candidates(rows)
    if not ranked_candidates:
        return [f"verdict{where}: none — no strategy row was validly measured"]
    top = ranked_candidates[0]
    lines = [_headline(ranked_candidates, where)]
    runner_up = ranked_candidates[1] if len(ranked_candidates) > 1 else None
    if runner_up is not None and runner_up.strategy != "static" and not within_noise(top, runner_up):
        lines.append(f"  margin: {_ratio(top, runner_up, f'the runner-up ({describe(runner_up)})')}")
    statics = [row for row in ranked_candidates if row.strategy == "static"]
    if top.strategy != "static":
        lines.append(f"  vs static: {_ratio(top, statics[0], f'static ({describe(statics[0])})')}" if statics
                     else "  vs static: no valid static row to compare with")
    reference = fastest_reference(rows)
    if reference is not None:
        lines.append(f"  vs the fastest reference: {_ratio(top, reference, describe(reference))}")
    elif any(row.reference for row in rows):
        lines.append("  vs the fastest reference: no reference row was validly measured")
    if top.spread is None:
        lines.append("  one repeat per row: no interval; measurement.repeats ≥ 2 gives one")
    elif top.spread.noisy:
        lines.append(f"  the winner's repeats are noisy (CV {top.spread.cv:.1%} > {top.spread.cv_threshold:.0%})")
    return lines


def verdict_lines(result: GenerateResult) -> list[str]:
    lengths = contexts(result)
    if not lengths:
        return ["verdict: none — no row was measured"]
    lines = []
    for context in lengths:
        where = "" if context is None else f" at context {context:,}"
        lines += _context_lines(rows_at(result, context), where)
    excluded = sum(1 for row in result.rows if is_excluded(row))
    if excluded:
        lines.append(f"  {excluded} contended row(s) left out (measurement.allow_contention is false)")
    return lines


def summary(result: GenerateResult) -> str | None:
    """The first context's verdict in a few words, for a list of jobs."""
    if not result.rows:
        return None
    context = contexts(result)[0]
    ranked_candidates = candidates(rows_at(result, context))
    if not ranked_candidates:
        return None
    top = ranked_candidates[0]
    tied = [row for row in ranked_candidates[1:] if within_noise(top, row)]
    where = "" if context is None else f"at context {context:,}: "
    if tied:
        return where + "within noise: " + ", ".join(f"{row_label(row)} / {row.kernel}" for row in [top, *tied])
    return f"{where}{row_label(top)} / {top.kernel}: {compact_rate(_rate(top))} {UNIT}"


def generate_verdict(result: GenerateResult) -> Verdict:
    return Verdict(lines=verdict_lines(result), summary=summary(result), rows=result.rows,
                   winner=winner(result), ranked=table_order(result))
