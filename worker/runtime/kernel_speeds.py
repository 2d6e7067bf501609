"""The worker's table of measured attention kernel speeds, and how `attention: auto` reads it.

One JSON file in the worker's cache directory (`kernel-speeds.json` beside the probe cache, or
`PADBENCH_KERNEL_SPEEDS_FILE`), kept between jobs and shared by the workers of one box and `padbench run` there.
Each figure is one row a job measured: the kind, device (a GPU's model name, or `cpu`), dtype, mode, entry point
(padded rows, packs, the KV cache) and length band it ran at, the model (its digest) and what else its row had
(`setting`: layout, batch size, compile…), the family and the kernel that ran, its rate, and the job, date and
torch that measured it. A newer figure of the same family in the same place replaces the older one.

How a pick is made (`pick_family`), in words the docs repeat:
- only figures of the job's kind, device, dtype, mode and entry point count, no older than `MAX_AGE_DAYS`
  (kernels and torch move on), and only of families that can run the job here;
- figures compare only with figures of the same model, length band and setting: such a group that has two
  families or more is a comparison (one job's rows, or several jobs that measured the same rows each with a
  kernel of its own);
- the comparison chosen is the nearest in length band, then the same model before another, then a model's rows
  before an attention sweep's kernels timed alone, then the newest;
- its fastest family wins, except that families within `TIE_SHARE` of the fastest are a tie, which goes to the
  family listed first among the candidates (the static default's order: the flash implementations, fastest
  first, then the rest as registered);
- no comparison: the static default, and the pick says so.
An unreadable file is treated as empty: it only ever holds figures that can be measured again.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from padbench.worker.runtime.state_files import locked, replace_json

# Figures older than this are not read: a driver, torch or kernel library installed since may rank them otherwise.
MAX_AGE_DAYS = 90
# Families closer than this share of the fastest figure are not told apart by one comparison.
TIE_SHARE = 0.02
# Lengths up to 512 tokens are band 0, then each band reaches four times as far (2,048, 8,192, …).
FIRST_BAND_TOKENS = 512
# What an attention sweep's figures count: kernels timed alone, evidence only where a model's own rows are missing.
ALONE_METRIC = "TFLOP/s (attention alone)"
# The file keeps this many figures at most, dropping the oldest: a worker's lifetime of jobs fits.
MAX_FIGURES = 5000


def length_band(tokens: int) -> int:
    """The band of a job's longest sequence: 0 up to 512 tokens, 1 up to 2,048, 2 up to 8,192, …"""
    return max(0, math.ceil(math.log(max(tokens, 1) / FIRST_BAND_TOKENS, 4)))


def band_text(band: int) -> str:
    return f"max_length ≤ {FIRST_BAND_TOKENS * 4 ** band:,}"


@dataclass(frozen=True)
class Place:
    """Where a figure was measured, as a pick must match it: every field equal."""

    kind: str  # the job kind whose attention it decides: padding or generate
    device: str  # a GPU's model name (`NVIDIA H100 80GB HBM3`), or `cpu`
    dtype: str
    mode: str  # inference or training (padding), generate
    entry: str  # padded, packed, decode


@dataclass(frozen=True)
class Figure:
    place: Place
    band: int
    model: str  # how reports name it
    model_digest: str  # what tells models apart
    setting: str  # what the row had besides its kernel: `packed · batch 32 · compile auto`
    family: str
    kernel: str  # what ran
    rate: float
    metric: str  # `tokens/s`, `output tokens/s`
    source: str  # `job 42`, `padbench run`
    measured_at: str  # ISO 8601, UTC
    torch: str | None = None

    def slot(self) -> tuple[Any, ...]:
        """What a newer figure of the same family replaces."""
        return self.place, self.band, self.model_digest, self.setting, self.family

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "place": asdict(self.place)}

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Figure:
        known = {field.name for field in fields(cls)}
        values = {key: value for key, value in document.items() if key in known}
        return cls(**{**values, "place": Place(**document["place"])})


@dataclass(frozen=True)
class Query:
    place: Place
    band: int
    model_digest: str
    candidates: tuple[str, ...]  # families that can run the job here, the static default's preference first
    default: str  # what runs without a comparison


@dataclass(frozen=True)
class Pick:
    family: str
    measured: bool
    reason: str
    fastest: Figure | None = None
    runner_up: Figure | None = None


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def comparisons(figures: Sequence[Figure], query: Query, now: datetime) -> list[list[Figure]]:
    """The groups of comparable figures (same band, model and setting) holding two candidate families or more,
    best first: nearest band, the same model, a model's rows before a sweep's, then the newest."""
    oldest = now - timedelta(days=MAX_AGE_DAYS)
    groups: dict[tuple[int, str, str], list[Figure]] = defaultdict(list)
    for figure in figures:
        if figure.place == query.place and figure.family in query.candidates and \
                parse_time(figure.measured_at) >= oldest:
            groups[(figure.band, figure.model_digest, figure.setting)].append(figure)
    found = [group for group in groups.values() if len({figure.family for figure in group}) >= 2]

    def order(group: list[Figure]) -> tuple[int, bool, bool, float]:
        newest = max(parse_time(figure.measured_at).timestamp() for figure in group)
        return (abs(group[0].band - query.band), group[0].model_digest != query.model_digest,
                group[0].metric == ALONE_METRIC, -newest)

    return sorted(found, key=order)


def ranked(group: Sequence[Figure], candidates: Sequence[str]) -> list[Figure]:
    """Each family's figure, fastest first; a tie with the fastest goes to the candidate listed first."""
    by_rate = sorted(group, key=lambda figure: -figure.rate)
    tied = [figure for figure in by_rate if figure.rate >= by_rate[0].rate * (1 - TIE_SHARE)]
    first = min(tied, key=lambda figure: candidates.index(figure.family))
    return [first, *(figure for figure in by_rate if figure is not first)]


def rate_text(rate: float) -> str:
    return f"{rate / 1000:,.1f}k" if rate >= 10_000 else f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def decision_text(fastest: Figure, runner_up: Figure, query: Query) -> str:
    tie = " (a tie within 2%: the default's preference)" if runner_up.rate >= fastest.rate * (1 - TIE_SHARE) else ""
    where = [fastest.setting]
    if fastest.model_digest != query.model_digest:
        where.append(f"model {fastest.model}")
    if fastest.band != query.band:
        where.append(f"measured at {band_text(fastest.band)}, this job {band_text(query.band)}")
    sources = fastest.source if fastest.source == runner_up.source else f"{fastest.source} and {runner_up.source}"
    return (f"fastest measured: {fastest.family} {rate_text(fastest.rate)} {fastest.metric} vs {runner_up.family} "
            f"{rate_text(runner_up.rate)}{tie} ({'; '.join(where)}) on {fastest.place.device} in {sources} on "
            f"{fastest.measured_at[:10]}")


def pick_family(figures: Sequence[Figure], query: Query, now: datetime | None = None) -> Pick:
    """The family `attention: auto` runs for `query`, and why (see the module's rules)."""
    found = comparisons(figures, query, now or datetime.now(timezone.utc))
    if not found:
        return Pick(query.default, False, f"no measurement comparing kernels for this job's kind, dtype, mode and "
                                          f"layout on {query.place.device}: the default, {query.default}")
    best = ranked(found[0], query.candidates)
    return Pick(best[0].family, True, decision_text(best[0], best[1], query), best[0], best[1])


class KernelSpeeds:
    """The table on disk: figures recorded under a lock and landed by atomic rename, read whole."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def figures(self) -> list[Figure]:
        """Every figure the file holds; one it cannot read is left out, an unreadable file reads as none."""
        try:
            entries = json.loads(self.path.read_text())["figures"]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        found = []
        for entry in entries if isinstance(entries, list) else []:
            try:
                figure = Figure.from_json(entry)
                parse_time(figure.measured_at)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            found.append(figure)
        return found

    def record(self, new: Sequence[Figure]) -> None:
        """Add figures; each replaces the older figure of its slot; the oldest go past `MAX_FIGURES`."""
        if not new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.path):
            kept = {figure.slot(): figure for figure in self.figures()}
            for figure in new:
                kept.pop(figure.slot(), None)
                kept[figure.slot()] = figure
            newest = sorted(kept.values(), key=lambda figure: parse_time(figure.measured_at))[-MAX_FIGURES:]
            self._write({"figures": [figure.to_json() for figure in newest]})

    def _write(self, document: dict[str, Any]) -> None:
        replace_json(self.path, document, indent=1)
