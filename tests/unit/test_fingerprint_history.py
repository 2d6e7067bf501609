"""Row fingerprints, a row's history over time and the regression check against a baseline, as pure functions
over stored results."""

from __future__ import annotations

import pytest

from padbench.report.fingerprint import measured_rows
from padbench.report.history import histories, history
from padbench.report.regression import NothingToCompare, check_against, matches
from tests.regression_results import SPEC, STEADY, padding_result, scaled


def fingerprint_of(result, layout: str) -> str:
    return next(row.fingerprint for row in measured_rows(result) if row.key[0] == layout)


def test_rows_measuring_the_same_thing_share_a_fingerprint_whatever_measured_them() -> None:
    old = padding_result({"static": STEADY, "dynamic": STEADY})
    new = padding_result({"static": scaled(STEADY, 2)}, torch="2.14.0", padbench="0.2.0",
                         date="2026-11-25T12:00:00+00:00")
    assert fingerprint_of(old, "static") == fingerprint_of(new, "static") != fingerprint_of(old, "dynamic")
    other_dtype = padding_result({"static": STEADY}, spec={**SPEC, "dtype": "bf16"})
    assert fingerprint_of(other_dtype, "static") != fingerprint_of(old, "static")


def test_a_row_keeps_its_fingerprint_in_a_job_that_swept_batch_sizes() -> None:
    alone = padding_result({"static": STEADY})
    row = alone.strategies[0]
    swept = alone.model_copy(update={"strategies": [row, row.model_copy(update={"batch_size": 16})]})
    keys = [measured.key[0] for measured in measured_rows(swept)]
    assert keys == ["static @ 8", "static @ 16"]  # the table tells them apart by batch size
    assert measured_rows(swept)[0].fingerprint == fingerprint_of(alone, "static")
    assert measured_rows(swept)[1].fingerprint != fingerprint_of(alone, "static")


def test_history_lists_points_oldest_first_with_the_versions_that_changed() -> None:
    old = padding_result({"static": STEADY})
    new = padding_result({"static": scaled(STEADY, 0.5)}, torch="2.14.0", date="2026-11-25T12:00:00+00:00")
    found = history(fingerprint_of(old, "static"), [(2, new), (1, old)])
    assert found is not None and [point.job_id for point in found.points] == [1, 2]
    first, second = found.points
    assert first.changed == {} and second.changed == {"torch": ["2.13.0", "2.14.0"]}
    assert first.ci95_low is not None and first.ci95_low < first.figure < (first.ci95_high or 0)
    assert found.key == ["static", "sdpa"] and found.metric == "tokens_per_s"
    assert history("0" * 16, [(1, old)]) is None
    assert histories(["0" * 16, fingerprint_of(old, "static")], [(1, old)])[0].fingerprint == found.fingerprint


def test_a_row_slower_beyond_noise_regresses_and_names_the_row_ratio_and_interval() -> None:
    base = padding_result({"static": STEADY, "dynamic": STEADY})
    slower = padding_result({"static": STEADY, "dynamic": scaled(STEADY, 0.8)})
    check = check_against((2, slower), ("main", 1, base), tolerance=0.0)
    assert check.regressed
    [row] = [row for row in check.rows if row.verdict == "slower"]
    assert row.key == ["dynamic", "sdpa"] and row.ratio == pytest.approx(0.8)
    assert row.ratio_low is not None and row.ratio_high is not None and row.ratio_low < 0.8 < row.ratio_high < 1
    assert "dynamic / sdpa" in check.summary and "0.800×" in check.summary and "95% interval" in check.summary


def test_within_noise_and_under_the_tolerance_pass() -> None:
    base = padding_result({"static": STEADY})
    jitter = padding_result({"static": [1002.0, 992.0, 1008.0, 997.0, 1001.0]})
    check = check_against((2, jitter), ("main", 1, base), tolerance=0.0)
    assert not check.regressed and check.rows[0].verdict == "within_noise"
    assert check.summary.startswith("within noise of baseline 'main'")
    slightly = padding_result({"static": scaled(STEADY, 0.97)})
    assert check_against((2, slightly), ("main", 1, base), tolerance=0.0).regressed
    tolerated = check_against((2, slightly), ("main", 1, base), tolerance=0.05)
    assert not tolerated.regressed and "tolerance" in tolerated.rows[0].line


def test_rows_without_repeats_are_unjudged_and_other_setups_do_not_compare() -> None:
    base = padding_result({"static": STEADY})
    single = padding_result({"static": [500.0]})
    check = check_against((2, single), ("main", 1, base), tolerance=0.0)
    assert not check.regressed and check.rows[0].verdict == "unjudged"
    other = padding_result({"static": STEADY}, spec={**SPEC, "dtype": "bf16"})
    assert not matches(other, base) and matches(single, base)
    with pytest.raises(NothingToCompare, match="no row of job 2"):
        check_against((2, other), ("main", 1, base), tolerance=0.0)
