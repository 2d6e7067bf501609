"""The probe's search policy against fake memory oracles: exact limits, few probes, sound fallbacks."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from worker.probe.search import (
    MemoryCurve,
    Reading,
    apply_margin,
    fit_curve,
    search_ceiling,
    search_limit,
)

GIB = 2**30
MIB = 2**20


class FakeDevice:
    """A device whose memory use is `usage(size)`; sizes whose use exceeds the capacity run out."""

    def __init__(self, usage: Callable[[int], int], capacity: int, baseline: int, measures_peaks: bool = True):
        self.usage, self.capacity, self.baseline = usage, capacity, baseline
        self.measures_peaks = measures_peaks
        self.calls: list[int] = []

    def __call__(self, size: int) -> Reading:
        self.calls.append(size)
        peak = self.usage(size)
        if peak > self.capacity:
            return Reading(fits=False)
        return Reading(fits=True, peak_bytes=peak if self.measures_peaks else None,
                       capacity_bytes=self.capacity, baseline_bytes=self.baseline)

    def true_limit(self, ceiling: int) -> int:
        return max((s for s in range(1, ceiling + 1) if self.usage(s) <= self.capacity), default=0)


def allocator_rounded(nbytes: float) -> int:
    """Memory the way a caching allocator reserves it: whole 2 MiB blocks."""
    return math.ceil(nbytes / (2 * MIB)) * 2 * MIB


def padded_like(weights: int, per_row: int, workspace: int) -> Callable[[int], int]:
    return lambda size: allocator_rounded(weights + workspace + per_row * size)


def masked_like(weights: int, per_row: int, per_row_squared: int) -> Callable[[int], int]:
    return lambda size: allocator_rounded(weights + per_row * size + per_row_squared * size * size)


AFFINE_CASES = [
    # gpt2-seed-like on an 80 GB and a 141 GB device, odd figures, then a tiny CPU model under a small
    # budget, where the 2 MiB rounding is two thirds of a row and may cost one more probe at the edge.
    (padded_like(400 * MIB, 150 * MIB, 90 * MIB), 79 * GIB, 400 * MIB, 6),
    (padded_like(400 * MIB, 150 * MIB, 90 * MIB), 139 * GIB, 400 * MIB, 6),
    (padded_like(3 * GIB, 37 * MIB + 777, 0), 70 * GIB, 3 * GIB, 6),
    (padded_like(20 * MIB, 3 * MIB + 12345, 1 * MIB), 300 * MIB, 20 * MIB, 7),
]


@pytest.mark.parametrize(("usage", "capacity", "baseline", "most_probes"), AFFINE_CASES)
def test_affine_memory_finds_the_exact_limit_in_few_probes(usage, capacity, baseline, most_probes) -> None:
    device = FakeDevice(usage, capacity, baseline)
    result = search_limit(device, curve="affine", ceiling=4096)
    limit = device.true_limit(4096)
    assert (result.largest_fit, result.smallest_oom) == (limit, limit + 1)
    assert len(device.calls) <= most_probes, device.calls
    assert result.predicted_limit is not None and abs(result.predicted_limit - limit) <= max(2, limit // 50)


@pytest.mark.parametrize("capacity", [40 * GIB, 79 * GIB, 139 * GIB])
def test_quadratic_memory_of_a_materialised_mask_finds_the_exact_limit(capacity: int) -> None:
    # 8 heads × (640·size)² bf16 scores dominate: the shape of packed attention with an eager mask.
    usage = masked_like(400 * MIB, 60 * MIB, 8 * 640 * 640 * 2 * 3)
    device = FakeDevice(usage, capacity, 400 * MIB)
    result = search_limit(device, curve="quadratic", ceiling=4096)
    limit = device.true_limit(4096)
    assert (result.largest_fit, result.smallest_oom) == (limit, limit + 1)
    assert len(device.calls) <= 5, device.calls


def test_plain_doubling_and_bisection_would_need_more_probes() -> None:
    usage, capacity, baseline, _ = AFFINE_CASES[1]
    device = FakeDevice(usage, capacity, baseline, measures_peaks=False)  # forces the fallback
    result = search_limit(device, curve="affine", ceiling=2048)
    assert result.largest_fit == device.true_limit(2048)
    assert len(device.calls) >= 11
    assert result.predicted_limit is None


def test_a_step_in_memory_the_fit_cannot_see_costs_few_extra_probes() -> None:
    # Above 300 rows the allocator switches to a costlier algorithm: the small probes never saw it.
    base = padded_like(400 * MIB, 150 * MIB, 90 * MIB)
    device = FakeDevice(lambda s: base(s) + (8 * GIB if s > 300 else 0), 79 * GIB, 400 * MIB)
    result = search_limit(device, curve="affine", ceiling=4096)
    limit = device.true_limit(4096)
    assert (result.largest_fit, result.smallest_oom) == (limit, limit + 1)
    assert len(device.calls) <= 11, device.calls  # no worse than bisection, far from a linear walk


def test_stops_at_the_ceiling_when_everything_fits() -> None:
    device = FakeDevice(padded_like(20 * MIB, MIB, 0), 100 * GIB, 20 * MIB)
    result = search_limit(device, curve="affine", ceiling=64)
    assert (result.largest_fit, result.smallest_oom) == (64, None)
    assert max(device.calls) == 64 and len(device.calls) <= 4


def test_size_one_running_out_ends_the_search_with_nothing_that_fits() -> None:
    device = FakeDevice(lambda s: 10 * GIB * s, 5 * GIB, GIB)
    result = search_limit(device, curve="affine", ceiling=1024)
    assert (result.largest_fit, result.smallest_oom, device.calls) == (0, 1, [1])


@pytest.mark.parametrize("curve", ["affine", "quadratic"])
def test_every_probe_lies_inside_the_bracket_known_at_that_time(curve: MemoryCurve) -> None:
    device = FakeDevice(masked_like(GIB, 70 * MIB, 5 * MIB), 60 * GIB, GIB)
    search_limit(device, curve=curve, ceiling=4096)
    limit = device.true_limit(4096)
    fits_below, ooms_above = 0, 4097
    for size in device.calls:
        assert fits_below < size < ooms_above
        if size <= limit:
            fits_below = size
        else:
            ooms_above = size


def test_fit_curve_interpolates_lines_and_parabolas() -> None:
    line = fit_curve([(1, 110), (5, 150)], "affine")
    assert line is not None and line(10) == pytest.approx(200)
    parabola = fit_curve([(1, 6), (2, 15), (4, 45)], "quadratic")  # 1 + 3s + 2s²
    assert parabola is not None and parabola.coefficients == pytest.approx((1, 3, 2))
    assert parabola.largest_size_within(1 + 3 * 10 + 2 * 100) == 10
    assert fit_curve([(3, 100)], "affine") is None


def test_a_downward_bending_quadratic_falls_back_to_the_local_line() -> None:
    curve = fit_curve([(1, 100), (2, 200), (3, 290)], "quadratic")
    assert curve is not None and curve.coefficients[2] == 0 and curve(4) == pytest.approx(380)


@pytest.mark.parametrize("limit", [1, 2, 19, 20, 21, 100, 515, 2047])
def test_the_margin_never_takes_more_than_its_share_of_the_limit(limit: int) -> None:
    chosen = apply_margin(limit, 0.05)
    assert 1 <= chosen <= limit and chosen >= 0.95 * limit
    assert apply_margin(limit, 0.0) == limit


def test_the_search_ceiling_leaves_room_for_the_margin_above_the_cap() -> None:
    ceiling = search_ceiling(100, 0.05)
    assert apply_margin(ceiling, 0.05) == 100 and apply_margin(ceiling + 1, 0.05) > 100
    assert search_ceiling(100, 0.0) == 100
