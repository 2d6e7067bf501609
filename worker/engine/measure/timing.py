"""The timing loop and the rules that decide whether a measurement counts.

The rules follow MLPerf LoadGen (a minimum duration AND a minimum count, else the run is invalid; every
sample issued equally often) and Hugging Face's optimum-benchmark (warm-up kept apart; CUDA events rather
than a synchronize per batch):
- warm-up batches first, timed separately (torch.compile's compile time lands there);
- then whole passes over the prepared batches, so every batch is issued equally often, until the run has
  lasted `min_seconds` AND `min_batches`; `max_batches` caps it, and a capped run that falls short of the
  minima is invalid, with the reason, rather than a number;
- on CUDA, one event per batch and one synchronize per pass (never per batch), so the host keeps the
  device queue full exactly as a real training or serving loop would;
- the headline is Σ real tokens / Σ measured seconds. The per-batch median and p90 are secondary figures,
  because a median over batches of very different sizes compares different regimes and weighs a tiny batch
  as much as a full one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

import torch

from padbench.contract.spec import MeasurementSpec
from padbench.worker.engine.data.batches import Batch


class BatchClock(Protocol):
    """Marks batch boundaries on the device's timeline and reads the intervals back in one go."""

    def start(self) -> None: ...

    def mark(self) -> None: ...

    def collect(self) -> list[float]: ...  # seconds of each batch marked since `start`; waits for the device


class PerfCounterClock:
    """CPU execution is synchronous, so the host's monotonic clock is the device's clock."""

    def __init__(self) -> None:
        self._marks: list[float] = []

    def start(self) -> None:
        self._marks = [time.perf_counter()]

    def mark(self) -> None:
        self._marks.append(time.perf_counter())

    def collect(self) -> list[float]:
        return [end - begin for begin, end in pairwise(self._marks)]


class CudaEventClock:
    """One CUDA event per batch boundary; only `collect` synchronizes (on the last event)."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._events: list[torch.cuda.Event] = []

    def _record(self) -> None:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self._device))
        self._events.append(event)

    def start(self) -> None:
        self._events = []
        self._record()

    def mark(self) -> None:
        self._record()

    def collect(self) -> list[float]:
        self._events[-1].synchronize()
        return [begin.elapsed_time(end) / 1000.0 for begin, end in pairwise(self._events)]


def clock_for(device: torch.device) -> BatchClock:
    return CudaEventClock(device) if device.type == "cuda" else PerfCounterClock()


def time_calls(calls: Sequence[Callable[[], object]], device: torch.device) -> list[float]:
    """Seconds each call took, the calls issued back to back and the device synchronised once, at the end."""
    clock = clock_for(device)
    clock.start()
    for call in calls:
        call()
        clock.mark()
    return clock.collect()


def mean_call_milliseconds(run: Callable[[], object], device: torch.device, times: int, warmup: int = 2) -> float:
    """Wall milliseconds per call of `run`, after `warmup` untimed calls (first calls compile and allocate):
    the calls issued back to back, the device synchronised before and after. For scripts timing one op."""
    for _ in range(warmup):
        run()
    _synchronize(device)
    started = time.perf_counter()
    for _ in range(times):
        run()
    _synchronize(device)
    return (time.perf_counter() - started) / times * 1e3


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class RepeatTiming:
    batch_indices: tuple[int, ...]  # which prepared batch each measured step issued
    batch_seconds: tuple[float, ...]

    @property
    def seconds(self) -> float:
        return sum(self.batch_seconds)

    @property
    def batches(self) -> int:
        return len(self.batch_indices)


@dataclass(frozen=True)
class Measurement:
    warmup_batches: int
    warmup_seconds: float
    repeats: tuple[RepeatTiming, ...]


def warmup_order(n_batches: int, count: int, also: Sequence[int] = ()) -> list[int]:
    """The warm-up's batches: the first `count` in order (cycling), then those of `also` not among them."""
    ordered = [issued % n_batches for issued in range(count)]
    return ordered + [index for index in dict.fromkeys(also) if index not in ordered]


def run_warmup(step: Callable[[int], None], indices: Sequence[int], clock: BatchClock) -> float:
    clock.start()
    for index in indices:
        step(index)
        clock.mark()
    return sum(clock.collect())


# Whether every rank of a job agrees to a proposal (one process: it agrees with itself). Ranks that step
# together must end a repeat after the same pass, however long each one's pass took.
AgreeFn = Callable[[bool], bool]


def _alone(proposal: bool) -> bool:
    return proposal


def run_repeat(step: Callable[[int], None], n_batches: int, settings: MeasurementSpec,
               clock: BatchClock, agree: AgreeFn = _alone) -> RepeatTiming:
    indices: list[int] = []
    seconds: list[float] = []
    capped = False
    while True:
        clock.start()  # a fresh start per pass keeps the host's sync gap out of the first interval
        for index in range(n_batches):
            if settings.max_batches is not None and len(indices) >= settings.max_batches:
                capped = True
                break
            step(index)
            clock.mark()
            indices.append(index)
        seconds.extend(clock.collect())
        long_enough = sum(seconds) >= settings.min_seconds and len(indices) >= settings.min_batches
        if capped or agree(long_enough):  # a cap falls on the same batch in every rank
            return RepeatTiming(tuple(indices), tuple(seconds))


def measure(step: Callable[[int], None], n_batches: int, settings: MeasurementSpec, clock: BatchClock,
            on_repeat: Callable[[int], None] | None = None, warmup: Sequence[int] | None = None,
            agree: AgreeFn = _alone) -> Measurement:
    """Warm up (on `warmup`'s batches, by default the first `settings.warmup_batches`), then
    `settings.repeats` measured runs of `step(batch_index)` over whole passes."""
    if n_batches <= 0:
        raise ValueError("nothing to measure: the strategy produced no batches")
    warmup = warmup_order(n_batches, settings.warmup_batches) if warmup is None else warmup
    warmup_seconds = run_warmup(step, warmup, clock)
    repeats = []
    for repeat in range(settings.repeats):
        if on_repeat is not None:
            on_repeat(repeat)
        repeats.append(run_repeat(step, n_batches, settings, clock, agree))
    return Measurement(len(warmup), warmup_seconds, tuple(repeats))


def invalid_reason(measurement: Measurement, settings: MeasurementSpec) -> str | None:
    """Why the run does not count, or None when every repeat met both minima."""
    for number, repeat in enumerate(measurement.repeats, start=1):
        which = f"repeat {number}: " if len(measurement.repeats) > 1 else ""
        if repeat.batches < settings.min_batches:
            return f"{which}measured {repeat.batches} batches, fewer than min_batches={settings.min_batches}"
        if repeat.seconds <= 0:
            return f"{which}the timer measured no time for {repeat.batches} batches"
        if repeat.seconds < settings.min_seconds:
            return (f"{which}measured {repeat.seconds:.3f} s, shorter than min_seconds={settings.min_seconds:g}"
                    f" (max_batches={settings.max_batches} stopped it)")
    return None


@dataclass(frozen=True)
class Throughput:
    # Rates are None when the clock measured no time: a rate over zero seconds is not a number to report.
    tokens_per_s: float | None  # Σ real tokens / Σ seconds over all repeats
    median_batch_tokens_per_s: float | None
    p90_batch_tokens_per_s: float | None
    repeat_tokens_per_s: tuple[float | None, ...]
    real_tokens: int
    computed_tokens: int
    batches: int
    seconds: float
    flops: float | None  # counted FLOPs of everything measured; None when any batch's count is unknown


def _rate(tokens: int, seconds: float) -> float | None:
    return tokens / seconds if seconds > 0 else None


def _p90(values: Sequence[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def summarize(measurement: Measurement, real_tokens: Sequence[int], computed_tokens: Sequence[int],
              flops: Sequence[float | None]) -> Throughput:
    """Aggregate the repeats; the per-batch sequences are indexed like the prepared batches."""
    indices = [i for repeat in measurement.repeats for i in repeat.batch_indices]
    seconds = [s for repeat in measurement.repeats for s in repeat.batch_seconds]
    per_batch = [real_tokens[i] / s for i, s in zip(indices, seconds, strict=True) if s > 0]
    counted = [flops[i] for i in indices]
    real = sum(real_tokens[i] for i in indices)
    return Throughput(
        tokens_per_s=_rate(real, sum(seconds)),
        median_batch_tokens_per_s=statistics.median(per_batch) if per_batch else None,
        p90_batch_tokens_per_s=_p90(per_batch) if per_batch else None,
        repeat_tokens_per_s=tuple(_rate(sum(real_tokens[i] for i in r.batch_indices), r.seconds)
                                  for r in measurement.repeats),
        real_tokens=real,
        computed_tokens=sum(computed_tokens[i] for i in indices),
        batches=len(indices),
        seconds=sum(seconds),
        flops=None if any(f is None for f in counted) else float(sum(f for f in counted if f is not None)),
    )


def batch_sanity_error(batch: Batch, max_length: int) -> str | None:
    """0 < real tokens ≤ rows × max_length and ≤ computed tokens.

    A corrupt token count must fail the run rather than enter Σ tokens unnoticed (a per-batch median would
    hide even an absurd count).
    """
    real, rows = batch.real_tokens, batch.rows
    if rows <= 0 or real <= 0:
        return f"a batch has {real} real tokens in {rows} rows (must be positive)"
    if real > rows * max_length:
        return f"a batch claims {real} real tokens in {rows} rows, above rows × max_length = {rows * max_length}"
    if real > batch.computed_tokens:
        return f"a batch claims {real} real tokens but computes only {batch.computed_tokens}"
    outside = [length for length in batch.lengths if not 0 < length <= max_length]
    if outside:
        return f"a batch holds a sequence of length {outside[0]}, outside 1..{max_length}"
    return None
