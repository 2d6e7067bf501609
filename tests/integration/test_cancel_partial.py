"""A job cancelled while it runs keeps the rows it finished, marked partial: the worker loop and a real padding
job child against a live server (SQLite and PostgreSQL), read back through the API and the client CLI; and
the server's fencing of those rows (the lease holder only, after a cancel request, once, never a success).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from padbench.cli import main
from padbench.contract.api import Capabilities, JobOut
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.loop import Supervisor, WorkerConfig
from tests.acceptance.specs import QUICK
from tests.integration.conftest import LiveServer, result_document
from tests.integration.job_targets import STALLED

STALLING_JOB = "tests.integration.job_targets:padding_job_stalling_after_its_first_row"
SPEC = {"kind": "padding", "device": "cpu", "dtype": "fp32", "attention": "sdpa", "strategies": ["static", "packed"]}
ONE_ROW_OF_TWO = {"reason": "cancelled", "rows_finished": 1, "rows_planned": 2, "last_row_measured_only": False}


def job(server: LiveServer, job_id: int) -> JobOut:
    with server.client("submitter") as http:
        return JobOut.model_validate(http.get(f"/v1/jobs/{job_id}").raise_for_status().json())


def wait_until(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_job_cancelled_after_its_first_row_keeps_that_row_marked_partial(
    any_live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = any_live_server
    with server.client("submitter") as http:
        job_id = http.post("/v1/jobs", json={"spec": QUICK}).raise_for_status().json()["id"]
    worker = Supervisor(WorkerApi(server.base_url, server.tokens["worker"]),
                        WorkerConfig(name="partial-test", job_target=STALLING_JOB, once=True),
                        Capabilities(device="cpu", kernels=["sdpa"]))
    loop = threading.Thread(target=worker.run)
    loop.start()
    try:
        wait_until(lambda: job(server, job_id).progress_message == STALLED)
        with server.client("submitter") as http:
            http.post(f"/v1/jobs/{job_id}/cancel").raise_for_status()
    finally:
        loop.join(timeout=120)
    assert not loop.is_alive()
    cancelled = job(server, job_id)
    assert cancelled.status.value == "cancelled"
    assert cancelled.error is not None and "after 1 of 2 rows" in cancelled.error
    with server.client("submitter") as http:
        result = http.get(f"/v1/jobs/{job_id}/results").raise_for_status().json()
    assert result["partial"] == ONE_ROW_OF_TWO
    assert [(row["strategy"], row["status"]) for row in result["strategies"]] == [("static", "ok")]
    assert result["strategies"][0]["tokens_per_s"] > 0

    monkeypatch.setenv("PADBENCH_SERVER", server.base_url)
    monkeypatch.setenv("PADBENCH_TOKEN", server.tokens["submitter"])
    assert main(["results", str(job_id)]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("PARTIAL RESULT: the job was cancelled after 1 of 2 strategy rows")
    assert "static" in shown and "packed" not in shown


# --- the server's side, driven by the worker's own HTTP client --------------------------------------------------

def running_job(server: LiveServer) -> tuple[WorkerApi, int, str]:
    api = WorkerApi(server.base_url, server.tokens["worker"])
    worker = api.register("partial-api-test", Capabilities(device="cpu", kernels=["sdpa"]))
    with server.client("submitter") as http:
        job_id = http.post("/v1/jobs", json={"spec": SPEC}).raise_for_status().json()["id"]
    lease = api.claim(worker.id)
    assert lease is not None and lease.job.id == job_id
    return api, job_id, lease.lease_token


def partial_document(marked: dict[str, Any] | None = ONE_ROW_OF_TWO) -> dict[str, Any]:
    row = {"strategy": "static", "attention": "sdpa", "kernel": "torch-sdpa", "batch_size": 8, "status": "ok",
           "tokens_per_s": 1234.5}
    return result_document(SPEC) | {"strategies": [row], "partial": marked}


def post(server: LiveServer, path: str, body: dict[str, Any], who: str = "worker") -> httpx.Response:
    with server.client(who) as http:
        return http.post(path, json=body)


def cancel(server: LiveServer, job_id: int) -> None:
    post(server, f"/v1/jobs/{job_id}/cancel", {}, who="submitter").raise_for_status()


def test_partial_rows_are_refused_while_no_cancel_was_requested(any_live_server: LiveServer) -> None:
    _, job_id, token = running_job(any_live_server)
    refused = post(any_live_server, f"/v1/leases/{job_id}/cancelled", {"lease_token": token,
                                                                      "result": partial_document()})
    assert refused.status_code == 409 and "no cancel request" in refused.json()["detail"]
    assert job(any_live_server, job_id).status.value == "running"
    with any_live_server.client("submitter") as http:
        assert http.get(f"/v1/jobs/{job_id}/results").status_code == 404


def test_partial_rows_are_kept_once_and_never_make_the_job_succeed(any_live_server: LiveServer) -> None:
    _, job_id, token = running_job(any_live_server)
    cancel(any_live_server, job_id)
    url = f"/v1/leases/{job_id}/cancelled"
    unmarked = post(any_live_server, url, {"lease_token": token, "result": partial_document(None)})
    assert unmarked.status_code == 422 and "result.partial" in unmarked.text
    timed_out = post(any_live_server, url, {"lease_token": token,
                                            "result": partial_document(ONE_ROW_OF_TWO | {"reason": "timed_out"})})
    assert timed_out.status_code == 422 and "reason is 'cancelled', not 'timed_out'" in timed_out.text
    miscounted = partial_document(ONE_ROW_OF_TWO | {"rows_finished": 2})
    assert post(any_live_server, url, {"lease_token": token, "result": miscounted}).status_code == 422
    as_success = post(any_live_server, f"/v1/leases/{job_id}/complete",
                      {"lease_token": token, "result": partial_document()})
    assert as_success.status_code == 422 and "must not be marked partial" in as_success.text
    assert post(any_live_server, url, {"lease_token": token, "result": partial_document()}).status_code == 204

    again = partial_document(ONE_ROW_OF_TWO | {"rows_finished": 1, "rows_planned": 3})
    assert post(any_live_server, url, {"lease_token": token, "result": again}).status_code == 409
    assert post(any_live_server, f"/v1/leases/{job_id}/complete",
                {"lease_token": token, "result": result_document(SPEC)}).status_code == 409
    assert job(any_live_server, job_id).status.value == "cancelled"
    with any_live_server.client("submitter") as http:
        kept = http.get(f"/v1/jobs/{job_id}/results").json()
    assert kept["partial"] == ONE_ROW_OF_TWO and kept["strategies"][0]["tokens_per_s"] == 1234.5


def test_a_job_cancelled_with_no_finished_row_still_has_no_results(any_live_server: LiveServer) -> None:
    api, job_id, token = running_job(any_live_server)
    cancel(any_live_server, job_id)
    api.fail(job_id, token, "cancelled on request; the job's child process was stopped", None)
    with any_live_server.client("submitter") as http:
        missing = http.get(f"/v1/jobs/{job_id}/results")
    assert missing.status_code == 404
    assert missing.json()["detail"] == f"job {job_id} has no results (status cancelled)"


def test_partial_rows_from_another_workers_token_are_403(any_live_server: LiveServer) -> None:
    _, job_id, token = running_job(any_live_server)
    cancel(any_live_server, job_id)
    stolen = post(any_live_server, f"/v1/leases/{job_id}/cancelled",
                  {"lease_token": token, "result": partial_document()}, who="worker2")
    assert stolen.status_code == 403
    assert job(any_live_server, job_id).status.value == "running"  # still the owner's to report
