"""A row's history, baselines and the regression check over real HTTP on SQLite and PostgreSQL, through the
CLI: results are crafted documents completed through the worker's lease API, never real runs."""

from __future__ import annotations

import json

import httpx
import pytest

from padbench.kinds.padding.contract import PaddingResult
from padbench.report.fingerprint import measured_rows
from tests.integration.conftest import LiveServer
from tests.integration.test_cli_client import cli_of
from tests.integration.test_server_jobs import claim, register, submit
from tests.regression_results import SPEC, STEADY, document, padding_result, scaled


def finish(user: httpx.Client, worker: httpx.Client, result: PaddingResult) -> int:
    """A job submitted by `user` and completed by `worker` with `result`."""
    job_id = submit(user, SPEC)
    lease = claim(worker, register(worker, f"box-{job_id}"))
    assert lease is not None and lease.job.id == job_id
    completed = worker.post(f"/v1/leases/{job_id}/complete",
                            json={"lease_token": lease.lease_token, "result": document(result)})
    assert completed.status_code == 204, completed.text
    return job_id


@pytest.fixture
def cli(any_live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    return cli_of(any_live_server, monkeypatch, capsys)


BEFORE = padding_result({"static": STEADY, "dynamic": STEADY})
AFTER = padding_result({"static": STEADY, "dynamic": scaled(STEADY, 0.8)}, torch="2.14.0",
                       date="2026-11-25T12:00:00+00:00")


def test_history_lists_both_points_with_the_versions_that_differ(any_live_server: LiveServer, cli) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu:
        first, second = finish(alice, gpu, BEFORE), finish(alice, gpu, AFTER)
    fingerprint = next(row.fingerprint for row in measured_rows(AFTER) if row.key[0] == "dynamic")
    code, out, err = cli("history", fingerprint, "--format", "json")
    assert code == 0, err
    points = json.loads(out)["points"]
    assert [point["job_id"] for point in points] == [first, second]
    assert points[1]["changed"] == {"torch": ["2.13.0", "2.14.0"]}
    code, out, _ = cli("history", str(second))
    assert code == 0 and out.count(fingerprint) == 1 and "torch 2.13.0 → 2.14.0" in out
    code, _, err = cli("history", "not-a-fingerprint")
    assert code == 2 and "neither a job ID nor" in err
    code, _, err = cli("history", "0" * 16)
    assert code == 1 and "no stored row has fingerprint" in err
