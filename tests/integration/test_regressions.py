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


JITTER = padding_result({"static": [1002.0, 992.0, 1008.0, 997.0, 1001.0], "dynamic": STEADY})


def test_check_exits_1_naming_the_slower_row_and_0_within_noise(any_live_server: LiveServer, cli) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu:
        base, slower, steady = finish(alice, gpu, BEFORE), finish(alice, gpu, AFTER), finish(alice, gpu, JITTER)
    code, out, err = cli("baseline", "set", "main", str(base))
    assert code == 0 and out.strip() == f"baseline main → job {base}", err
    code, out, _ = cli("baseline", "check", str(slower), "--against", "main")
    assert code == 1
    assert "1 of 2 rows slower than baseline 'main' beyond noise: dynamic / sdpa @ batch 8: 0.800× the baseline " \
           "(95% interval" in out
    code, out, _ = cli("baseline", "check", str(steady), "--against", "main")
    assert code == 0 and f"job {steady}: within noise of baseline 'main' (job {base}) on 2 rows" in out
    code, out, _ = cli("baseline", "check", str(slower), "--against", "main", "--tolerance", "0.25", "--format", "json")
    assert code == 0 and json.loads(out)["regressed"] is False
    code, out, _ = cli("baseline", "list")
    assert code == 0 and out.startswith(f"main  job {base}  set by alice ")


def test_baseline_refusals(any_live_server: LiveServer, cli) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu, \
            any_live_server.client("submitter2") as bob, any_live_server.client("viewer") as viewer:
        base = finish(alice, gpu, BEFORE)
        other = finish(alice, gpu, padding_result({"static": STEADY}, spec={**SPEC, "dtype": "bf16"}))
        bobs = finish(bob, gpu, BEFORE)
        queued = submit(alice, SPEC)
        assert alice.put("/v1/baselines/main", json={"job_id": base}).status_code == 200
        moved = bob.put("/v1/baselines/main", json={"job_id": base})
        assert moved.status_code == 404  # bob cannot read alice's job
        taken = bob.put("/v1/baselines/main", json={"job_id": bobs})
        assert taken.status_code == 403 and "set by alice" in taken.json()["detail"]
        assert viewer.put("/v1/baselines/main", json={"job_id": base}).status_code == 403
        assert alice.put("/v1/baselines/no%20spaces", json={"job_id": base}).status_code == 422
        assert alice.put("/v1/baselines/next", json={"job_id": queued}).status_code == 404  # no result yet
        assert viewer.get("/v1/baselines/main/check", params={"job": base}).json()["regressed"] is False
        assert alice.get("/v1/baselines/nope/check", params={"job": base}).status_code == 404
        assert alice.get("/v1/baselines/main/check", params={"job": base, "tolerance": 1}).status_code == 422
    code, _, err = cli("baseline", "check", str(other), "--against", "main")
    assert code == 1 and f"no row of job {other} measures what a row of baseline 'main'" in err
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal of a bad option
        cli("baseline", "check", str(base), "--against", "main", "--tolerance", "5")
    assert refused.value.code == 2
