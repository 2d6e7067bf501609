"""The search policy of the OOM probe: which sizes to try, and when the limit is known.

Pure and deterministic: it talks to the device only through a `probe(size) -> Reading` oracle, so the
unit tests drive it with a fake one. The policy spends far fewer probes than doubling + bisection
(~11 over 1..2048) by using the peak memory each successful probe measured:

1. probe size 1 (every job must at least fit one row);
2. probe a size aimed at most of the free memory, assuming the curve's shape through the model's baseline;
3. fit memory against size through the measured peaks (affine for padded and flash layouts, quadratic
   for a materialised attention mask), predict the largest size that fits the capacity, and probe a
   little below it;
4. confirm with a bracketing pair: a size that fits and one that runs out at most BRACKET_TOLERANCE of the
   fit apart. The true limit lies between the two, so `choose_size` can honour the margin without
   knowing it exactly.

The peaks are allocated bytes and miss the caching allocator's fragmentation, so predictions err high.
After an out-of-memory the search steps back by the tolerance (a fit there ends it), then by doubling
steps, never below the middle of the bracket; a prediction that keeps falling short widens its step the
same way. A poor fit costs a logarithmic number of extra probes, never a linear walk.

PyTorch's out-of-memory message ("Tried to allocate X … of which Y is free") is not used to step back:
on an H200, X − Y overstated the shortfall several times over (cached blocks of partly used segments are
neither free nor releasable), and steps taken from it landed at half the true limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from padbench.worker.jobs.probing.curves import MemoryCurve, fit_curve

Basis = Literal["allocated", "reserved"]

# The first prediction aims this fraction of the predicted size short of it (see next_size).
APPROACH_SHORTFALL = 0.05
# The second probe aims at this share of the free memory (see _exploration_size).
EXPLORATION_SHARE = 0.8
# The search ends once a fit and an out-of-memory lie at most this fraction of the fit apart (at least 1):
# the true limit is then within 4% above the largest fit, and the default 5% margin taken off the top of
# the bracket still lands at or below that fit.
BRACKET_TOLERANCE = 0.04


@dataclass(frozen=True)
class Reading:
    """What one probe said. Peaks and capacity are in the same frame (bytes the probe may use)."""

    fits: bool
    peak_bytes: int | None = None  # highest memory seen over the worst-case passes (fits only)
    # The caching allocator's reserved peak (fits only; None where no allocator reports one): its
    # fragmentation included, and cached blocks it would have freed rather than run out.
    reserved_bytes: int | None = None
    capacity_bytes: int | None = None  # the most the probe could have used: free device memory or budget
    baseline_bytes: int | None = None  # memory held once the model is built, before any batch


@dataclass
class SearchResult:
    largest_fit: int  # 0 when even the first size ran out of memory
    smallest_oom: int | None  # None when the ceiling itself fits
    predicted_limit: int | None  # the first prediction made from fitted peaks, for the report
    probed: list[int] = field(default_factory=list)


def search_ceiling(cap: int, margin: float) -> int:
    """The largest size worth probing: just enough above `cap` that the margin can still be honoured."""
    ceiling = cap
    while apply_margin(ceiling + 1, margin) <= cap:
        ceiling += 1
    return ceiling


def apply_margin(limit: int, margin: float) -> int:
    """Step back `margin` of the confirmed limit (rounded down, so never more than `margin` below it)."""
    return max(1, limit - math.floor(margin * limit)) if limit > 0 else 0


def bracket_tolerance(size: int) -> int:
    """How far above a fit an out-of-memory may lie for the search to stop: BRACKET_TOLERANCE, at least 1."""
    return max(1, math.floor(BRACKET_TOLERANCE * size))


def choose_size(largest_fit: int, smallest_oom: int | None, margin: float, cap: int) -> int:
    """The size to run: known to fit, and at most `margin` below the true limit wherever in the bracket it is.

    The true limit lies in [largest_fit, smallest_oom − 1] (at largest_fit when nothing ran out); stepping
    the margin back from the top of that range keeps within the margin of every limit the bracket allows.
    """
    top = largest_fit if smallest_oom is None else smallest_oom - 1
    return min(cap, largest_fit, apply_margin(top, margin))


def _closing_size(oom: int) -> int:
    """The smallest size that would close the bracket below `oom` if it fits."""
    step = bracket_tolerance(oom)
    while step > 1 and step > bracket_tolerance(oom - step):
        step -= 1
    return oom - step


class _SearchState:
    def __init__(self, curve: MemoryCurve, ceiling: int) -> None:
        self.curve = curve
        self.ceiling = ceiling
        self.fits: dict[int, Reading] = {}
        self.ooms: list[int] = []
        self.outcomes_after_exploration: list[bool] = []
        self.predicted_limit: int | None = None

    @property
    def lo(self) -> int:
        return max(self.fits, default=0)

    @property
    def hi(self) -> int:
        """The smallest size known (or assumed, above the ceiling) not to be worth running."""
        return min(self.ooms, default=self.ceiling + 1)

    def done(self) -> bool:
        if self.lo >= self.ceiling:
            return True
        return bool(self.ooms) and self.hi - self.lo <= bracket_tolerance(self.lo)

    def record(self, size: int, reading: Reading) -> None:
        if len(self.fits) >= 2:
            self.outcomes_after_exploration.append(reading.fits)
        if reading.fits:
            self.fits[size] = reading
        else:
            self.ooms.append(size)

    def capacity(self) -> int | None:
        capacities = [r.capacity_bytes for r in self.fits.values() if r.capacity_bytes is not None]
        return min(capacities, default=None)

    def baseline(self) -> int | None:
        baselines = [r.baseline_bytes for r in self.fits.values() if r.baseline_bytes is not None]
        return min(baselines, default=None)

    def measured_points(self, basis: Basis = "allocated") -> list[tuple[int, int]]:
        peaks = {size: r.peak_bytes if basis == "allocated" else r.reserved_bytes for size, r in self.fits.items()}
        return [(size, peak) for size, peak in peaks.items() if peak is not None]

    def trailing_streak(self) -> tuple[bool | None, int]:
        """The outcome of the latest probes after exploration, and how many in a row gave it."""
        if not self.outcomes_after_exploration:
            return None, 0
        last = self.outcomes_after_exploration[-1]
        count = 0
        for outcome in reversed(self.outcomes_after_exploration):
            if outcome != last:
                break
            count += 1
        return last, count


def _exploration_size(state: _SearchState) -> int | None:
    """Second probe: the size predicted to use EXPLORATION_SHARE of the free memory, given the curve's shape.

    With one measured point the curve is anchored at the baseline (size 0), so whatever the first probe
    allocated once (workspaces, buffers) is counted as growth, and the quadratic is assumed purely
    quadratic: both overestimate the growth, so this probe fits, and lies far enough out to fit a slope.
    """
    capacity, baseline, points = state.capacity(), state.baseline(), state.measured_points()
    if capacity is None or baseline is None or not points:
        return None
    size, peak = points[0]
    growth = peak - baseline
    if growth <= 0:
        return None
    aim = EXPLORATION_SHARE * (capacity - baseline)
    if state.curve == "quadratic":
        return math.floor(size * math.sqrt(aim / growth))
    return math.floor(size * aim / growth)


def _predicted_size(state: _SearchState, basis: Basis = "allocated") -> int | None:
    """The largest size the curve fitted through the `basis` peaks says fits the capacity."""
    capacity = state.capacity()
    points = state.measured_points(basis)
    baseline = state.baseline()
    if state.curve == "quadratic" and len(points) == 2 and baseline is not None:
        points = [(0, baseline), *points]  # anchor a third point until a third peak is measured
    # Three measured peaks (the third from near the limit) also show any bend in an "affine" curve;
    # extrapolated over the short distance left, that bend is information rather than noise.
    curve = fit_curve(points, "quadratic" if len(points) >= 3 else state.curve)
    if capacity is None or curve is None:
        return None
    return curve.largest_size_within(capacity)


def _without_peaks(state: _SearchState) -> int:
    """Doubling, then bisection: the fallback when probes cannot measure their peak memory."""
    if state.hi > state.ceiling:
        return min(state.ceiling, 2 * state.lo)
    return (state.lo + state.hi) // 2


def next_size(state: _SearchState, start: int) -> int:
    lo, hi = state.lo, state.hi
    if not state.fits:
        return min(start, hi - 1)
    if len(state.fits) == 1:
        guess = _exploration_size(state)
        return _clamp(guess if guess is not None else _without_peaks(state), lo, hi)
    guess = _predicted_size(state)
    if guess is None:
        return _clamp(_without_peaks(state), lo, hi)
    if state.predicted_limit is None:
        # The first prediction. Allocated peaks miss the allocator's fragmentation and predict too high (by
        # 48% for gpt2-seed's 127 GiB logits on an H200); reserved peaks include it, and predicted that
        # limit within 0.3%, but also keep cached blocks, which can make them predict low (or, through a
        # quadratic anchored at the baseline, far too high: 310 for a masked limit of 102). So aim at the
        # lower of the two predictions, or, with no reserved peaks (CPU), a little short of the allocated one.
        reserved = _predicted_size(state, "reserved")
        aim = min(guess, reserved) if reserved is not None else math.floor(guess * (1 - APPROACH_SHORTFALL))
        state.predicted_limit = min(reserved if reserved is not None else guess, state.ceiling)
        return _clamp(aim, lo, hi)
    last_fit, streak = state.trailing_streak()
    if last_fit is False:
        return _clamp(_after_running_out(state, streak), lo, hi)
    if state.ooms:
        # A fit below a known out-of-memory: try the size that ends the search if it fits. The fitted curve
        # is no guide inside this bracket: it predicted a size that ran out, or one far below a fit.
        return _clamp(_closing_size(hi), lo, hi)
    if state.measured_points("reserved"):
        # Only fits so far, the first of them at the reserved prediction: the limit lies a little above.
        # Step one tolerance up (an out-of-memory there ends the search), doubling while fits keep coming,
        # but not past the allocated prediction, which fragmentation only lowers.
        step = bracket_tolerance(lo) * 2 ** (streak - 1)
        return _clamp(min(lo + step, max(guess, lo + bracket_tolerance(lo))), lo, hi)
    if streak >= 2:
        # Fits keep landing below the limit: one tolerance step up, doubling while the limit recedes.
        return _clamp(max(guess, lo + bracket_tolerance(lo) * 2 ** (streak - 2)), lo, hi)
    return _clamp(_confirming_size(state, guess), lo, hi)


def _confirming_size(state: _SearchState, guess: int) -> int:
    """The probe most likely to end the search, given the predicted limit `guess` above the largest fit."""
    lo = state.lo
    if guess >= state.ceiling:
        return state.ceiling
    step = bracket_tolerance(lo)
    if guess < lo + step:  # the limit is predicted within the tolerance: one step up should run out
        return lo + step
    return guess - bracket_tolerance(guess) // 2  # just under the limit, so the next step up closes it


def _after_running_out(state: _SearchState, streak: int) -> int:
    """Step back from the out-of-memory: first by the tolerance (a fit there ends the search), then by
    doubling steps while misses repeat, never below the middle of the bracket — so a poor prediction costs
    a logarithmic number of probes, never a walk."""
    lo, hi = state.lo, state.hi
    step = (hi - _closing_size(hi)) * 2 ** (streak - 1)
    return max(hi - step, (lo + hi + 1) // 2)


def _clamp(size: int, lo: int, hi: int) -> int:
    return max(lo + 1, min(hi - 1, size))


def search_limit(probe: Callable[[int], Reading], *, curve: MemoryCurve, ceiling: int, start: int = 1,
                 max_probes: int = 40) -> SearchResult:
    """Find the largest size in 1..ceiling that fits, probing only sizes inside the open bracket.

    Every probe lies strictly between the largest known fit and the smallest known OOM, so the
    bracket shrinks each time and the search ends; `max_probes` only guards against a broken oracle.
    """
    state = _SearchState(curve, ceiling)
    probed: list[int] = []
    while not state.done() and len(probed) < max_probes:
        size = next_size(state, start)
        probed.append(size)
        state.record(size, probe(size))
    return SearchResult(
        largest_fit=state.lo,
        smallest_oom=min(state.ooms, default=None),
        predicted_limit=state.predicted_limit,
        probed=probed,
    )
