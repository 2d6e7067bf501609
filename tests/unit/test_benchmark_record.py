"""`padbench results ID --format record`: a result as a self-describing benchmark record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from padbench.cli import main
from padbench.report.fingerprint import measured_rows
from padbench.report.record import RECORD_SCHEMA, benchmark_record
from tests.regression_results import STEADY, document, padding_result


def test_the_record_says_what_on_which_hardware_how_with_what_and_when() -> None:
    result = padding_result({"static": STEADY})
    record = benchmark_record(result, job_id=7)
    assert record["schema"] == RECORD_SCHEMA and record["job_id"] == 7
    assert record["date"] == result.environment.started_at
    assert record["entity"]["kind"] == "padding" and record["entity"]["dtype"] == "fp32"
    assert record["entity"]["data_digest"] == "0123456789abcdef"
    assert record["hardware"]["device"] == "cpu" and record["hardware"]["interconnect"] is None
    assert record["versions"]["torch"] == "2.13.0" and record["versions"]["padbench"] == "0.1.0"
    assert record["spec"] == result.spec.model_dump(mode="json")
    [row] = record["rows"]
    assert row["strategy"] == "static" and row["fingerprint"] == measured_rows(result)[0].fingerprint
    assert row["tokens_per_s"] == pytest.approx(1000.0) and row["ci95"][0] < 1000.0 < row["ci95"][1]
    assert row["usd_per_million_tokens"] is None  # no price given: no cost
    assert record["result"] == document(result)


def test_results_from_a_file_as_a_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document(padding_result({"static": STEADY}))), encoding="utf-8")
    assert main(["results", str(path), "--format", "record"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == RECORD_SCHEMA
