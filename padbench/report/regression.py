"""A job's rows against a baseline's rows of the same fingerprint: which got slower beyond noise.

A row is slower when Welch's t-test on the two rows' repeats says their means differ (5% level) and the ratio
of the means is below 1 − tolerance: the test keeps noise from failing a CI run, the tolerance keeps a real
but negligible change (1%, say) from failing it. The ratio's 95% interval is Fieller's. A row with a single
repeat on either side has no spread to judge by: it is listed as unjudged, never passed off as within noise.
"""

from __future__ import annotations

import math

from padbench.contract.history import RegressionCheck, RowCheck, RowVerdict
from padbench.contract.results import JobResultBase
from padbench.contract.student_t import means_differ_95, ratio_interval_95
from padbench.kinds.record import kind_spec
from padbench.report.fingerprint import MeasuredRow, measured_rows

MAX_RATIO = 1e15


class NothingToCompare(ValueError):
    """No row of the job measures what a row of the baseline measures."""


def _ratio(figure: float, baseline: float, higher_is_faster: bool) -> float | None:
    if figure <= 0 or baseline <= 0:
        return None
    return min(MAX_RATIO, figure / baseline if higher_is_faster else baseline / figure)


def _label(row: MeasuredRow) -> str:
    return " / ".join(row.key) + ("" if row.batch is None else f" @ batch {row.batch}")


def _check(base: MeasuredRow, figure: float | None, ratio: float | None, verdict: RowVerdict, line: str,
           bounds: tuple[float | None, float | None] = (None, None)) -> RowCheck:
    return RowCheck(key=list(base.key), fingerprint=base.fingerprint, baseline=base.figure, figure=figure,
                    ratio=ratio, ratio_low=bounds[0], ratio_high=bounds[1], verdict=verdict, line=line)


def judge_row(base: MeasuredRow, row: MeasuredRow | None, tolerance: float, higher_is_faster: bool) -> RowCheck:
    """The verdict on one baseline row and the job's row of the same fingerprint (None: the job lacks it)."""
    label = _label(base)
    if base.figure is None:
        return _check(base, None if row is None else row.figure, None, "unjudged",
                      f"{label}: the baseline did not measure it")
    if row is None or row.figure is None:
        return _check(base, None, None, "missing", f"{label}: measured by the baseline, not by this job")
    ratio = _ratio(row.figure, base.figure, higher_is_faster)
    if ratio is None or row.moments is None or base.moments is None or not higher_is_faster:
        return _check(base, row.figure, ratio, "unjudged",
                      f"{label}: {_times(ratio)} the baseline, no repeats to tell it from noise")
    bounds = ratio_interval_95(row.moments, base.moments)
    low, high = (None, None) if bounds is None else (bounds[0], None if math.isinf(bounds[1]) else bounds[1])
    differs = means_differ_95(row.moments, base.moments)
    verdict: RowVerdict = ("slower" if differs and ratio < 1 - tolerance else "faster" if differs and ratio > 1
                           else "within_noise")
    interval = "" if low is None else f" (95% interval {low:.3f}–{'∞' if high is None else f'{high:.3f}'}×)"
    words = {"slower": "slower beyond noise", "faster": "faster beyond noise",
             "within_noise": "within noise" if not differs else f"within the {tolerance:.0%} tolerance"}[verdict]
    return _check(base, row.figure, ratio, verdict, f"{label}: {ratio:.3f}× the baseline{interval}, {words}",
                  (low, high))


def _times(ratio: float | None) -> str:
    return "no ratio to" if ratio is None else f"{ratio:.3f}×"


def check_against(job: tuple[int, JobResultBase], baseline: tuple[str, int, JobResultBase],
                  tolerance: float) -> RegressionCheck:
    """Every baseline row whose fingerprint the job has, judged; NothingToCompare when there is none."""
    job_id, result = job
    name, baseline_job_id, base_result = baseline
    rows = {row.fingerprint: row for row in measured_rows(result)}
    base_rows = [row for row in measured_rows(base_result) if row.fingerprint in rows]
    if result.kind != base_result.kind or not base_rows:
        raise NothingToCompare(f"no row of job {job_id} measures what a row of baseline {name!r} (job "
                               f"{baseline_job_id}) measures: the model, data, GPU, dtype, mode, layout, "
                               "kernel or batch size differ")
    higher = kind_spec(result.kind).report.compare.higher_is_faster
    checks = [judge_row(base, rows.get(base.fingerprint), tolerance, higher) for base in base_rows]
    regressed = [check for check in checks if check.verdict in ("slower", "missing")]
    summary = (f"{len(regressed)} of {len(checks)} rows slower than baseline {name!r} beyond noise: "
               + "; ".join(check.line for check in regressed) if regressed
               else f"within noise of baseline {name!r} (job {baseline_job_id}) on {len(checks)} rows")
    return RegressionCheck(job_id=job_id, baseline=name, baseline_job_id=baseline_job_id, tolerance=tolerance,
                           regressed=bool(regressed), rows=checks, summary=summary[:2000])


def matches(result: JobResultBase, base_result: JobResultBase) -> bool:
    """True when some row of `result` measures what a row of the baseline's result measures."""
    if result.kind != base_result.kind:
        return False
    fingerprints = {row.fingerprint for row in measured_rows(base_result)}
    return any(row.fingerprint in fingerprints for row in measured_rows(result))
