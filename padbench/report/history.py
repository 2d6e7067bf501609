"""A row's figure over time: every stored row of one fingerprint, oldest first, with its 95% interval and the
versions (padbench, torch, transformers, CUDA, driver, kernel packages) that changed since the point before.
"""

from __future__ import annotations

from collections.abc import Iterable

from padbench.contract.history import History, HistoryPoint
from padbench.contract.results import JobResultBase
from padbench.kinds.record import kind_spec
from padbench.report.fingerprint import MeasuredRow, changed_versions, measured_rows, versions
from padbench.report.identity import device_name

Stored = tuple[int, JobResultBase]  # a job id and its result


def _interval(result: JobResultBase, key: tuple[str, str]) -> tuple[float | None, float | None]:
    rule = kind_spec(result.kind).report.compare
    spread = rule.spreads(result).get(key) if rule.spreads is not None else None
    return (None, None) if spread is None else (spread.ci95_low_tokens_per_s, spread.ci95_high_tokens_per_s)


def histories(fingerprints: Iterable[str], stored: Iterable[Stored]) -> list[History]:
    """The history of each of `fingerprints` over `stored` results (each result's rows computed once), in the
    order given; a fingerprint no row has is left out."""
    found: dict[str, list[tuple[int, JobResultBase, MeasuredRow]]] = {fingerprint: [] for fingerprint in fingerprints}
    for job_id, result in stored:
        for row in measured_rows(result):
            if row.fingerprint in found:
                found[row.fingerprint].append((job_id, result, row))
    return [_history(fingerprint, points) for fingerprint, points in found.items() if points]


def history(fingerprint: str, stored: Iterable[Stored]) -> History | None:
    """The history of `fingerprint` over `stored` results; None when no row of theirs has it."""
    found = histories([fingerprint], stored)
    return found[0] if found else None


def _history(fingerprint: str, found: list[tuple[int, JobResultBase, MeasuredRow]]) -> History:
    found.sort(key=lambda point: (point[1].environment.started_at, point[0]))
    points = []
    for index, (job_id, result, row) in enumerate(found):
        low, high = _interval(result, row.key)
        before = found[index - 1][1].environment if index else None
        points.append(HistoryPoint(job_id=job_id, date=result.environment.started_at, figure=row.figure,
                                   ci95_low=low, ci95_high=high, versions=versions(result.environment),
                                   changed={} if before is None else changed_versions(before, result.environment)))
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
