"""Memory as a function of batch size: the curves the OOM probe fits through its measured peaks.

Padded and flash layouts grow affinely in tokens per batch; a materialised attention mask grows
quadratically. Fits interpolate through well-spread measured points rather than regress over all of them:
the points nearest the limit model it best, and there are only two or three of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

MemoryCurve = Literal["affine", "quadratic"]
# Sizes fitted together lie at least this fraction apart (see _spread_out).
MIN_SPREAD = 1 / 16


@dataclass(frozen=True)
class Polynomial:
    """memory(size) = c0 + c1·size + c2·size²."""

    coefficients: tuple[float, float, float]

    def __call__(self, size: float) -> float:
        c0, c1, c2 = self.coefficients
        return c0 + c1 * size + c2 * size * size

    def slope_at(self, size: float) -> float:
        _, c1, c2 = self.coefficients
        return c1 + 2 * c2 * size

    def largest_size_within(self, capacity: float) -> int | None:
        """The largest integer size whose predicted memory fits; None if the curve does not grow."""
        c0, c1, c2 = self.coefficients
        if c2 > 0:
            discriminant = c1 * c1 - 4 * c2 * (c0 - capacity)
            if discriminant < 0:
                return 0
            return math.floor((-c1 + math.sqrt(discriminant)) / (2 * c2))
        if c1 > 0 and c2 == 0:
            return math.floor((capacity - c0) / c1)
        return None


def fit_curve(points: Sequence[tuple[int, int]], curve: MemoryCurve) -> Polynomial | None:
    """Interpolate through the given (size, bytes) points: two for a line, three for a quadratic.

    A quadratic that bends downwards (measurement noise on a nearly linear curve) falls back to the
    line through the two largest points, which is the better local model then.
    """
    if curve == "quadratic":
        chosen = _spread_out(points, 3)
        if len(chosen) == 3:
            quadratic = _quadratic_through(chosen)
            if quadratic.coefficients[2] > 0:
                return quadratic
    chosen = _spread_out(points, 2)
    return _line_through(chosen) if len(chosen) == 2 else None


def _spread_out(points: Sequence[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """The largest point, then the next largest ones each at least MIN_SPREAD below the previous pick.

    Local points model the curve best near the limit, but a chord between neighbouring sizes measures
    allocator rounding rather than growth; where too few points are spread out, closer ones fill in.
    """
    ordered = sorted({size: peak for size, peak in points}.items(), reverse=True)
    picked = ordered[:1]
    for size, peak in ordered[1:]:
        if len(picked) < count and size <= picked[-1][0] * (1 - MIN_SPREAD):
            picked.append((size, peak))
    for point in ordered:
        if len(picked) < count and point not in picked:
            picked.append(point)
    return sorted(picked)


def _line_through(points: Sequence[tuple[int, int]]) -> Polynomial:
    (x0, y0), (x1, y1) = points
    slope = (y1 - y0) / (x1 - x0)
    return Polynomial((y0 - slope * x0, slope, 0.0))


def _quadratic_through(points: Sequence[tuple[int, int]]) -> Polynomial:
    (x0, y0), (x1, y1), (x2, y2) = points
    # Newton's divided differences, expanded into monomial coefficients.
    d01 = (y1 - y0) / (x1 - x0)
    d12 = (y2 - y1) / (x2 - x1)
    c2 = (d12 - d01) / (x2 - x0)
    c1 = d01 - c2 * (x0 + x1)
    c0 = y0 - d01 * x0 + c2 * x0 * x1
    return Polynomial((c0, c1, c2))
