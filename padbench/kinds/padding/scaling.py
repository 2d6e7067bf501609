"""How a scaling axis is reported (`gpus: [1, 2, 4]`): the GPU count of each row, its tokens/s per GPU and its
scaling efficiency against the smallest count that measured the same row; a line per row's curve under the
table, and the points the plots draw."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.experts import compare_kernel
from padbench.report.cells import MISSING, number

SCALING_COLUMNS = ("GPUs", "tokens/s/GPU", "scaling eff.")
# A row's curve: (GPU count, tokens/s per GPU, efficiency), smallest count first.
ScalingCurve = list[tuple[int, float, float | None]]


def is_scaling(result: PaddingResult) -> bool:
    return any(row.scaling is not None for row in result.strategies)


def largest_count(result: PaddingResult) -> int | None:
    """The most GPUs a scaling axis's rows ran on; None for a job on one count."""
    return max((row.scaling.gpus for row in result.strategies if row.scaling is not None), default=None)


def scaling_cells(row: StrategyResult) -> tuple[str, str, str]:
    point = row.scaling
    if point is None:
        return MISSING, MISSING, MISSING
    efficiency = MISSING if point.efficiency is None else f"{point.efficiency:.0%}"
    return str(point.gpus), number(point.tokens_per_s_per_gpu, ",.0f"), efficiency


def curve_name(row: StrategyResult) -> str:
    return f"{row.layout_label} · {compare_kernel(row)} @ {row.batch_size}"


def scaling_curves(result: PaddingResult) -> dict[str, ScalingCurve]:
    """tokens/s per GPU and efficiency against GPU count, for each row measured at two or more counts."""
    curves: dict[str, ScalingCurve] = defaultdict(list)
    for row in result.strategies:
        point = row.scaling
        if point is not None and point.tokens_per_s_per_gpu is not None:
            curves[curve_name(row)].append((point.gpus, point.tokens_per_s_per_gpu, point.efficiency))
    return {name: sorted(points) for name, points in curves.items() if len(points) > 1}


def scaling_lines(result: PaddingResult) -> list[str]:
    """`packed · sdpa @ 8: 1 GPU 7,100 · 2 GPUs 6,900 (97%) · 4 GPUs 6,500 (92%)` tokens/s per GPU."""
    lines = []
    for name, points in scaling_curves(result).items():
        steps = [f"{gpus} GPU{'s' if gpus > 1 else ''} {per_gpu:,.0f}"
                 + ("" if efficiency is None or index == 0 else f" ({efficiency:.0%})")
                 for index, (gpus, per_gpu, efficiency) in enumerate(points)]
        lines.append(f"  {name}: {' · '.join(steps)}")
    return ["scaling (tokens/s per GPU; efficiency against the smallest count):", *lines] if lines else []


def scaling_fields(row: StrategyResult) -> dict[str, Any]:
    point = row.scaling
    return {"gpus": None if point is None else point.gpus,
            "scaling_tokens_per_s_per_gpu": None if point is None else point.tokens_per_s_per_gpu,
            "scaling_efficiency": None if point is None else point.efficiency,
            "scaling_baseline_gpus": None if point is None else point.baseline_gpus}
