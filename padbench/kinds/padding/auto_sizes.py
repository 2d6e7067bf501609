"""`batch_size: auto:N` in padding reports: the batch cell of a row batched at several sizes, and which sizes
the probe chose for which sequences."""

from __future__ import annotations

from padbench.kinds.padding.contract import PaddingResult, StrategyResult


def batch_cell(row: StrategyResult) -> str:
    """The batch size, or for `auto:N` on a layout batched by length the range of its tiers' sizes."""
    if row.batch_tiers is not None and len(row.batch_tiers) > 1:
        sizes = [tier.batch_size for tier in row.batch_tiers]
        return f"{min(sizes)}–{max(sizes)}"
    return "—" if row.batch_size is None else str(row.batch_size)  # None: `auto` could not be probed


def tier_lines(result: PaddingResult) -> list[str]:
    """For each `auto:N` row, the sizes the probe chose and for which sequences."""
    lines = []
    for row in result.strategies:
        if row.auto_times is None or not row.batch_tiers:
            continue
        name = f"{row.label} / {row.kernel}, batch_size auto:{row.auto_times}"
        if len(row.batch_tiers) == 1:
            lines.append(f"  {name}: one size, {row.batch_size} — every batch of this layout has the same worst "
                         "case, so there is nothing to choose again")
            continue
        tiers = " · ".join(f"≤ {tier.longest} tokens ({tier.sequences:,} sequences): {tier.batch_size}"
                           for tier in row.batch_tiers)
        lines.append(f"  {name}: {tiers}")
    return ["batch sizes chosen per length (auto:N):", *lines] if lines else []


def tiers_field(row: StrategyResult) -> str | None:
    """`95:512;180:256;…`: each tier's longest sequence and its batch size, for CSV."""
    if row.batch_tiers is None:
        return None
    return ";".join(f"{tier.longest}:{tier.batch_size}" for tier in row.batch_tiers)
