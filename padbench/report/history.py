"""A row's figure over time: every stored row of one fingerprint, oldest first, with its 95% interval and the
versions (padbench, torch, transformers, CUDA, driver, kernel packages) that changed since the point before.

Where the server passes its baselines and the automatic checks' flags (`Marks`), each point also names the
baselines set on its job, carries the flags its job was given as its result was stored, and judges its row
against the row of every baseline among the history's points, as `padbench baseline check` would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from padbench.contract.history import MAX_BASELINES, History, HistoryPoint, PointCheck, RegressionFlag
from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_spec
from padbench.report.fingerprint import MeasuredRow, changed_versions, measured_rows, versions
from padbench.report.identity import device_name
from padbench.report.regression import judge_row

Stored = tuple[int, JobResultBase]  # a job id and its result
Found = tuple[int, JobResultBase, MeasuredRow]


@dataclass(frozen=True)
class Marks:
    """What the server knows of the jobs beside their results: the baseline names set on each job, the flags
    the automatic check gave each as its result was stored, and the tolerance it checks with."""

    baselines: Mapping[int, Sequence[str]] = field(default_factory=dict)
    flags: Mapping[int, Sequence[RegressionFlag]] = field(default_factory=dict)
    tolerance: float = 0.0


def _interval(result: JobResultBase, key: tuple[str, str]) -> tuple[float | None, float | None]:
    rule = kind_spec(result.kind).report.compare
    spread = rule.spreads(result).get(key) if rule.spreads is not None else None
    return (None, None) if spread is None else (spread.ci95_low_tokens_per_s, spread.ci95_high_tokens_per_s)


def histories(fingerprints: Iterable[str], stored: Iterable[Stored], marks: Marks | None = None) -> list[History]:
    """The history of each of `fingerprints` over `stored` results (each result's rows computed once), in the
    order given; a fingerprint no row has is left out."""
    found: dict[str, list[Found]] = {fingerprint: [] for fingerprint in fingerprints}
    for job_id, result in stored:
        for row in measured_rows(result):
            if row.fingerprint in found:
                found[row.fingerprint].append((job_id, result, row))
    return [_history(fingerprint, points, marks or Marks()) for fingerprint, points in found.items() if points]


def history(fingerprint: str, stored: Iterable[Stored], marks: Marks | None = None) -> History | None:
    """The history of `fingerprint` over `stored` results; None when no row of theirs has it."""
    found = histories([fingerprint], stored, marks)
    return found[0] if found else None


def _against(point: Found, found: list[Found], marks: Marks) -> list[PointCheck]:
    """The point's row judged against the row of each baseline among the history's points (not its own)."""
    job_id, result, row = point
    higher = kind_spec(result.kind).report.compare.higher_is_faster
    checks = []
    for base_job, _, base_row in found:
        for name in marks.baselines.get(base_job, ()) if base_job != job_id else ():
            check = judge_row(base_row, row, marks.tolerance, higher)
            checks.append(PointCheck(baseline=name, baseline_job_id=base_job, verdict=check.verdict,
                                     ratio=check.ratio, ratio_low=check.ratio_low, ratio_high=check.ratio_high,
                                     line=check.line))
    return checks[:MAX_BASELINES]


def _history(fingerprint: str, found: list[Found], marks: Marks) -> History:
    found.sort(key=lambda point: (point[1].environment.started_at, point[0]))
    points = []
    for index, (job_id, result, row) in enumerate(found):
        low, high = _interval(result, row.key)
        before = found[index - 1][1].environment if index else None
        points.append(HistoryPoint(job_id=job_id, date=result.environment.started_at, figure=row.figure,
                                   ci95_low=low, ci95_high=high, versions=versions(result.environment),
                                   changed={} if before is None else changed_versions(before, result.environment),
                                   baselines=list(marks.baselines.get(job_id, ()))[:MAX_BASELINES],
                                   against=_against(found[index], found, marks),
                                   regressions=list(marks.flags.get(job_id, ()))[:MAX_BASELINES]))
    job_id, result, row = found[-1]
    report = kind_spec(result.kind).report
    facts, rule = report.run_facts(result), report.compare
    measured = " · ".join([facts.model, device_name(result), facts.dtype, facts.mode])  # every point's, undated
    return History(fingerprint=fingerprint, kind=result.kind, key=list(row.key), key_names=list(rule.key_names),
                   batch=row.batch, metric=rule.metric, metric_label=rule.metric_label,
                   higher_is_faster=rule.higher_is_faster, title=measured, points=points)


def fingerprints_of(result: JobResultBase) -> list[str]:
    """The fingerprints of a result's rows, in its rows' order."""
    return [row.fingerprint for row in measured_rows(result)]
