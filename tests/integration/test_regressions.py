"""A row's history, baselines and the regression check over real HTTP on SQLite and PostgreSQL, through the
CLI: results are crafted documents completed through the worker's lease API, never real runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest

from padbench.client.display import format_status
from padbench.contract.api import JobOut
from padbench.contract.history import Histories
from padbench.kinds.padding.contract import PaddingResult
from padbench.report.fingerprint import measured_rows
from tests.integration.conftest import LiveServer, empty_postgres, loopback_socket, serve
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
    code, out, _ = cli("check", str(slower), "--against", "main")  # the gate spelled as `padbench check`
    assert code == 1 and "1 of 2 rows slower than baseline 'main' beyond noise" in out
    code, out, _ = cli("baseline", "check", str(slower), "--against", "main", "--tolerance", "0.25", "--format", "json")
    assert code == 0 and json.loads(out)["regressed"] is False
    code, out, _ = cli("baseline", "list")
    assert code == 0 and out.startswith(f"main  job {base}  set by alice ")
    code, out, _ = cli("history", str(slower))  # each point against the baseline among them
    assert code == 0 and "baseline main" in out and "main: 0.800× slower beyond noise" in out


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


class Receiver:
    """A local HTTP server on loopback that keeps every JSON body posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()
                receiver.arrived.set()

            def log_message(self, *args: object) -> None:  # quiet
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(params=["sqlite", "postgresql"])
def hooked_server(request: pytest.FixtureRequest, tmp_path: Path, receiver: Receiver) -> Iterator[LiveServer]:
    """A live server posting regressions to `receiver`."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'padbench.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_database")
        empty_postgres(url)
    with serve(url, tmp_path, webhook_url=receiver.url) as server:
        yield server


def test_a_new_job_matching_a_baseline_is_flagged_counted_and_posted(hooked_server: LiveServer,
                                                                     receiver: Receiver) -> None:
    with hooked_server.client("submitter") as alice, hooked_server.client("worker") as gpu, \
            hooked_server.client("viewer") as viewer:
        base = finish(alice, gpu, BEFORE)
        assert alice.put("/v1/baselines/main", json={"job_id": base}).status_code == 200
        steady, slower = finish(alice, gpu, JITTER), finish(alice, gpu, AFTER)
        assert receiver.arrived.wait(timeout=30)
        flagged = JobOut.model_validate(alice.get(f"/v1/jobs/{slower}").json())
        unflagged = JobOut.model_validate(alice.get(f"/v1/jobs/{steady}").json())
        metrics = viewer.get("/metrics").text
        histories = Histories.model_validate(viewer.get("/v1/history", params={"job": slower}).json()).histories
    dynamic = next(found for found in histories if found.key[0] == "dynamic")  # the history marks what was found
    assert [(point.job_id, point.baselines) for point in dynamic.points] == [(base, ["main"]), (steady, []),
                                                                             (slower, [])]
    assert [[check.verdict for check in point.against] for point in dynamic.points] == [[], ["within_noise"],
                                                                                        ["slower"]]
    assert [[flag.regressed for flag in point.regressions] for point in dynamic.points] == [[], [False], [True]]
    assert [(flag.baseline, flag.regressed) for flag in flagged.regressions] == [("main", True)]
    assert "dynamic / sdpa @ batch 8: 0.800×" in flagged.regressions[0].summary
    assert [(flag.baseline, flag.regressed) for flag in unflagged.regressions] == [("main", False)]
    assert 'padbench_regressed_jobs{baseline="main"} 1.0' in metrics
    assert "REGRESSED" in format_status(flagged) and "REGRESSED" not in format_status(unflagged)
    [body] = receiver.bodies  # one post: the job within noise posts nothing
    assert body["event"] == "padbench.regression" and body["job_id"] == slower and body["regressed"] is True
    assert [row["key"] for row in body["rows"] if row["verdict"] == "slower"] == [["dynamic", "sdpa"]]


def test_an_unreachable_webhook_never_costs_the_result(tmp_path: Path) -> None:
    dead = loopback_socket()  # bound, never listening: a connection is refused at once
    url = f"http://127.0.0.1:{dead.getsockname()[1]}/hook"
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    with serve(database, tmp_path, webhook_url=url, webhook_timeout_seconds=1) as server, \
            server.client("submitter") as alice, server.client("worker") as gpu:
        base = finish(alice, gpu, BEFORE)
        assert alice.put("/v1/baselines/main", json={"job_id": base}).status_code == 200
        slower = finish(alice, gpu, AFTER)
        assert alice.get(f"/v1/jobs/{slower}/results").status_code == 200
        assert alice.get(f"/v1/jobs/{slower}").json()["regressions"][0]["regressed"] is True
    dead.close()
