"""The search policy of the OOM probe: which sizes to try, and when the limit is known.

Pure and deterministic: it talks to the device only through a `probe(size) -> Reading` oracle, so the
unit tests drive it with a fake one. The policy spends far fewer probes than doubling + bisection
(~11 over 1..2048) by using the peak memory each successful probe measured:

1. probe size 1 (every job must at least fit one row);
2. probe a size aimed at most of the free memory, assuming the curve's shape through the model's baseline;
3. fit memory against size through the measured peaks (affine for padded and flash layouts, quadratic
   for a materialised attention mask), predict the largest size that fits the capacity, and probe it;
4. confirm with a bracketing pair: a size that fits and one that runs out at most BRACKET_TOLERANCE of the
   fit apart (adjacent sizes when that is under one), refitting on every new peak (a secant step). The
   true limit lies between the two, so `choose_size` can honour the margin without knowing it exactly.
   An out-of-memory whose allocator said how many bytes it lacked (PyTorch's CUDA message does) moves the
   estimate back by that many bytes' worth of sizes: fragmentation the peaks cannot see is measured there.

Only a miss repeated on the same side widens the step (doubling), so a poor fit costs a logarithmic
number of extra probes, never a linear walk.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from worker.probe.curves import MemoryCurve, fit_curve

# The first prediction aims this fraction of the free memory short of the limit (see next_size).
APPROACH_SHORTFALL = 0.02
# The second probe aims at this share of the free memory (see _exploration_size).
EXPLORATION_SHARE = 0.8
# The search ends once a fit and an out-of-memory lie at most this fraction of the fit apart (at least 1):
# well inside the default 5% margin, and it spares the probes that would walk to adjacent sizes.
BRACKET_TOLERANCE = 0.02


@dataclass(frozen=True)
class Reading:
    """What one probe said. Peaks and capacity are in the same frame (bytes the probe may use)."""

    fits: bool
    peak_bytes: int | None = None  # highest memory seen over the worst-case passes (fits only)
    capacity_bytes: int | None = None  # the most the probe could have used: free device memory or budget
    baseline_bytes: int | None = None  # memory held once the model is built, before any batch
    # Out-of-memory only: how many bytes the failing allocation lacked, when the allocator said so.
    deficit_bytes: int | None = None


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
        self.deficits: dict[int, int] = {}
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
            if reading.deficit_bytes is not None:
                self.deficits[size] = reading.deficit_bytes

    def capacity(self) -> int | None:
        capacities = [r.capacity_bytes for r in self.fits.values() if r.capacity_bytes is not None]
        return min(capacities, default=None)

    def baseline(self) -> int | None:
        baselines = [r.baseline_bytes for r in self.fits.values() if r.baseline_bytes is not None]
        return min(baselines, default=None)

    def measured_points(self) -> list[tuple[int, int]]:
        return [(size, r.peak_bytes) for size, r in self.fits.items() if r.peak_bytes is not None]

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


def _predicted_size(state: _SearchState, shortfall: float = 0.0) -> int | None:
    """The largest size the fitted curve says fits, leaving `shortfall` of the headroom unused."""
    capacity = state.capacity()
    points = state.measured_points()
    baseline = state.baseline()
    if state.curve == "quadratic" and len(points) == 2 and baseline is not None:
        points = [(0, baseline), *points]  # anchor a third point until a third peak is measured
    # Three measured peaks (the third from near the limit) also show any bend in an "affine" curve;
    # extrapolated over the short distance left, that bend is information rather than noise.
    curve = fit_curve(points, "quadratic" if len(points) >= 3 else state.curve)
    if capacity is None or curve is None:
        return None
    headroom = capacity - (baseline if baseline is not None else 0)
    return curve.largest_size_within(capacity - shortfall * headroom)


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
        # Approach the predicted limit from just below: a probe that fits measures its peak, and the
        # short secant from there is far more accurate than the long extrapolation from the small probes;
        # a probe that runs out teaches nothing but the bracket.
        state.predicted_limit = min(guess, state.ceiling)
        cautious = _predicted_size(state, shortfall=APPROACH_SHORTFALL)
        return _clamp(cautious if cautious is not None else guess, lo, hi)
    last_fit, streak = state.trailing_streak()
    estimate = _deficit_estimate(state)
    if estimate is not None and not (last_fit is False and streak >= 3):
        # Below the estimate nothing is known to run out: close the bracket one tolerance step up.
        return _clamp(estimate if estimate > lo else lo + bracket_tolerance(lo), lo, hi)
    if last_fit is False:
        return _after_running_out(state, guess, streak)
    if last_fit is True and streak >= 2:  # the limit keeps receding upwards: widen the step
        guess = max(guess, lo + 2 ** (streak - 2))
    return _clamp(_confirming_size(state, guess), lo, hi)


def _deficit_estimate(state: _SearchState) -> int | None:
    """The limit implied by the smallest out-of-memory whose allocator said how much it lacked.

    The fitted peaks see allocated bytes only, not the allocator's fragmentation (on an H200 the limit
    lay 12% below what they predicted), so an out-of-memory's own deficit is the better evidence: step
    back from that size by as many sizes as free the missing bytes at the fitted growth. That growth
    misses the fragmentation too, so the step is if anything too long: the estimate errs low, where a
    probe fits and measures its peak, and one tolerance step up then closes the bracket.
    """
    deficit = state.deficits.get(state.hi)
    curve = fit_curve(state.measured_points(), state.curve)
    if deficit is None or curve is None:
        return None
    growth = curve.slope_at(state.hi)
    return state.hi - math.ceil(deficit / growth) if growth > 0 else None


def _confirming_size(state: _SearchState, guess: int) -> int:
    """The probe most likely to end the search, given the predicted limit `guess` above the largest fit."""
    lo = state.lo
    if guess >= state.ceiling:
        return state.ceiling
    step = bracket_tolerance(lo)
    if guess < lo + step:  # the limit is predicted within the tolerance: one step up should run out
        return lo + step
    return guess - bracket_tolerance(guess) // 2  # just under the limit, so the next step up closes it


def _after_running_out(state: _SearchState, guess: int, streak: int) -> int:
    """After an out-of-memory the fit overestimates: try the size that would close the bracket if it fits,
    or, when misses repeat, back off the fit doubling the unused headroom, and bisect as a last resort."""
    lo, hi = state.lo, state.hi
    closing = _closing_size(hi)
    if streak == 1:
        return _clamp(closing, lo, hi)
    backed_off = _predicted_size(state, shortfall=APPROACH_SHORTFALL * 2 ** (streak - 1))
    size = min(closing, guess, backed_off if backed_off is not None else closing)
    if size <= lo or streak >= 3:  # the curve is no guide inside this bracket
        size = (lo + hi) // 2
    return _clamp(size, lo, hi)


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
