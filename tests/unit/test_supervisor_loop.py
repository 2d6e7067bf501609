"""The supervisor's run/report decisions, with real spawned children and an in-process fake server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from padbench.contract.api import Capabilities, LeaseOut
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.loop import FatalWorkerError, Supervisor, WorkerConfig

TARGETS = "tests.unit.supervisor_targets"
pytestmark = pytest.mark.usefixtures("supervised_kind")  # the leases carry its specs


class FakeServer:
    """Answers the worker endpoints; records every call as (action, body)."""

    def __init__(self, heartbeat_status: int = 200, cancel: bool = False, jobs: list[dict[str, Any]] | None = None,
                 down_for_reports: int = 0, cancel_after_progress: bool = False,
                 refuse: dict[str, int] | None = None, heartbeat_job_status: str | None = None,
                 wait_for_progress: bool = False):
        self.calls: list[tuple[str, Any]] = []
        self.heartbeat_status = heartbeat_status
        # What a refused heartbeat says the job is now (the server's `job_status`); None says nothing.
        self.heartbeat_job_status = heartbeat_job_status
        self.cancel = cancel
        # Cancel only once a heartbeat carries progress: the child has got that far.
        self.cancel_after_progress = cancel_after_progress
        # Hold `cancel` and a refused `heartbeat_status` back until some heartbeat has carried progress: a
        # child slow to start on a loaded machine is then past writing its pid file when it is killed.
        self.wait_for_progress = wait_for_progress
        self.progressed = False
        self.refuse = refuse or {}  # action → the status it is answered with
        self.jobs = list(jobs or [])
        # The first this-many complete/fail calls get 503, as from a proxy in front of a restarting server.
        self.down_for_reports = down_for_reports
        self.when_down: Any = None  # called at each report answered 503, e.g. to stop the worker then

    def handle(self, request: httpx.Request) -> httpx.Response:
        action = request.url.path.rsplit("/", 1)[-1]
        body = json.loads(request.content) if request.content else None
        self.calls.append((action, body))
        expires = (datetime.now(timezone.utc) + timedelta(seconds=3)).isoformat()
        if action == "workers":
            return httpx.Response(201, json={"id": 1, "name": body["name"], "capabilities": body["capabilities"],
                                             "registered_at": expires})
        if action == "leases":
            if not self.jobs:
                return httpx.Response(204)
            return httpx.Response(200, json=lease_body(self.jobs.pop(0)))
        if action == "heartbeat":
            self.progressed |= body is not None and body["progress"] is not None
            held_back = self.wait_for_progress and not self.progressed
            if self.heartbeat_status != 200 and not held_back:
                refusal = {"detail": "not the current lease"}
                if self.heartbeat_job_status is not None:
                    refusal["job_status"] = self.heartbeat_job_status
                return httpx.Response(self.heartbeat_status, json=refusal)
            progressed = body is not None and body["progress"] is not None
            cancel = (self.cancel and not held_back) or (self.cancel_after_progress and progressed)
            return httpx.Response(200, json={"cancel_requested": cancel, "lease_expires_at": expires})
        if action in self.refuse:
            return httpx.Response(self.refuse[action], json={"detail": f"{action} refused"})
        if action in ("complete", "fail") and self.down_for_reports > 0:
            self.down_for_reports -= 1
            if self.when_down is not None:
                self.when_down()
            return httpx.Response(503, json={"detail": "restarting"})
        return httpx.Response(204)

    def actions(self) -> list[str]:
        return [action for action, _ in self.calls]

    def last(self, action: str) -> Any:
        return next(body for name, body in reversed(self.calls) if name == action)


def lease_body(spec: dict[str, Any], job_id: int = 5) -> dict[str, Any]:
    """A lease of a job with `spec`: a `supervised` test job's (tests/supervised_kind/) unless it names its kind."""
    now = datetime.now(timezone.utc)
    spec = {"kind": "supervised", **spec}
    job = {"id": job_id, "kind": spec["kind"], "status": "running", "attempts": 1, "max_attempts": 3,
           "submitter": "alice", "created_at": now.isoformat(), "spec": spec}
    return {"job": job, "lease_token": "lease-abc", "lease_expires_at": (now + timedelta(seconds=3)).isoformat()}


def supervisor(server: FakeServer, target: str, **config: Any) -> Supervisor:
    api = WorkerApi("http://padbench.test", "w0rker", transport=httpx.MockTransport(server.handle))
    settings = WorkerConfig(name="unit", job_target=f"{TARGETS}:{target}", idle_poll_first_s=0.01, **config)
    return Supervisor(api, settings, Capabilities(device="cpu"))


def run_one(server: FakeServer, target: str, spec: dict[str, Any], **config: Any) -> Supervisor:
    sup = supervisor(server, target, **config)
    sup.worker_id = 1
    sup.run_lease(LeaseOut.model_validate(lease_body(spec)))
    return sup


def test_a_result_is_completed_with_the_lease_token_and_progress_is_relayed() -> None:
    server = FakeServer()
    run_one(server, "finish_with_progress", {"kind": "padding"})
    assert server.actions()[-1] == "complete"
    assert server.last("complete")["lease_token"] == "lease-abc"
    assert server.last("complete")["result"]["kind"] == "padding"
    beats = [body for action, body in server.calls if action == "heartbeat"]
    assert beats and beats[-1]["progress"] > 0 and beats[-1]["message"].startswith("step")


def test_a_result_outside_the_contract_is_a_failure_not_a_completion() -> None:
    server = FakeServer()
    run_one(server, "return_non_result", {"kind": "padding"})
    assert server.actions()[-1] == "fail"
    assert "does not match the result contract" in server.last("fail")["error"]
    assert server.last("fail")["lease_token"] == "lease-abc"


def test_a_child_exception_is_failed_with_its_traceback() -> None:
    server = FakeServer()
    run_one(server, "raise_error", {"kind": "padding"})
    failure = server.last("fail")
    assert failure["error"].startswith("error: ValueError: no such strategy")
    assert "Traceback" in failure["traceback"]
    assert "raise_error" in failure["traceback"]


def test_a_cancel_on_a_heartbeat_kills_the_child(tmp_path: Path) -> None:
    server = FakeServer(cancel=True, wait_for_progress=True)
    pid_file = tmp_path / "pid"
    run_one(server, "run_until_killed", {"pid_file": str(pid_file)})
    pid = int(pid_file.read_text())
    assert not process_alive(pid)
    assert "heartbeat" in server.actions()
    assert "cancelled" in server.last("fail")["error"]


def test_a_cancel_reports_the_rows_the_job_finished_marked_partial() -> None:
    server = FakeServer(cancel_after_progress=True)
    run_one(server, "finish_a_row_then_wait", {"kind": "padding"})
    assert server.actions()[-1] == "cancelled" and "fail" not in server.actions()
    report = server.last("cancelled")
    assert report["lease_token"] == "lease-abc"
    assert report["result"]["partial"] == {"reason": "cancelled", "rows_finished": 1, "rows_planned": 2,
                                         "last_row_measured_only": False}
    assert [row["tokens_per_s"] for row in report["result"]["strategies"]] == [1234.5]


def test_finished_rows_the_server_refuses_still_end_the_job_cancelled() -> None:
    server = FakeServer(cancel_after_progress=True, refuse={"cancelled": 422})
    run_one(server, "finish_a_row_then_wait", {"kind": "padding"})
    assert server.actions()[-2:] == ["cancelled", "fail"]
    assert "cancelled on request" in server.last("fail")["error"]


# Ended elsewhere, or (running, queued) taken by another worker once the lease was missed past its grace.
@pytest.mark.parametrize("job_status", ["succeeded", "cancelled", "failed", None, "running", "queued"])
def test_a_heartbeat_saying_the_lease_is_lost_kills_the_child_and_reports_nothing(tmp_path: Path,
                                                                                  job_status: str | None) -> None:
    # None: a server that does not say
    server = FakeServer(heartbeat_status=409, heartbeat_job_status=job_status, wait_for_progress=True)
    pid_file = tmp_path / "pid"
    run_one(server, "run_until_killed", {"pid_file": str(pid_file)})
    assert not process_alive(int(pid_file.read_text()))
    assert server.actions()[-1] == "heartbeat"


def test_a_timeout_is_a_failure_naming_the_limit(tmp_path: Path) -> None:
    server = FakeServer()
    run_one(server, "run_until_killed", {"pid_file": str(tmp_path / "pid")}, job_timeout_s=1.5)
    assert server.last("fail")["error"].startswith("timeout: child ran past its 2 s limit")


def test_stop_releases_the_lease_and_kills_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = FakeServer(jobs=[{"pid_file": str(pid_file)}])
    sup = supervisor(server, "run_until_killed")
    thread = threading.Thread(target=sup.run)
    thread.start()
    wait_for(pid_file.exists)
    sup.request_stop()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert server.actions()[0] == "workers"
    assert server.actions()[-1] == "release"
    assert server.last("release") == {"lease_token": "lease-abc"}
    assert not process_alive(int(pid_file.read_text()))


def test_the_worker_and_client_commands_never_import_torch() -> None:
    # A fresh interpreter: other tests in this session may have imported torch themselves.
    probe = ("import sys, padbench.cli, padbench.worker.supervisor.loop, padbench.worker.cli.work,"
             " padbench.client.cli;"
             "padbench.cli.build_parser(); print('torch' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "False"


def test_a_refused_token_stops_the_worker_with_a_clear_error() -> None:
    api = WorkerApi("http://padbench.test", "bad", transport=httpx.MockTransport(
        lambda request: httpx.Response(401, json={"detail": "invalid token"})))
    sup = Supervisor(api, WorkerConfig(name="unit"), Capabilities(device="cpu"))
    with pytest.raises(FatalWorkerError, match="refused to register this worker: HTTP 401: invalid token"):
        sup.run()


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for(condition: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_once_runs_a_single_job_then_returns() -> None:
    server = FakeServer(jobs=[{"kind": "padding"}, {"kind": "padding"}])
    sup = supervisor(server, "raise_error", once=True)
    sup.run()
    assert sup.jobs_run == 1
    assert server.actions() == ["workers", "leases", "fail"]


def test_a_child_over_the_host_memory_cap_is_killed_and_failed() -> None:
    server = FakeServer()
    run_one(server, "hold_memory", {"mib": 256}, job_memory_cap_bytes=128 * 2**20, job_timeout_s=60)
    error = server.last("fail")["error"]
    assert error.startswith("oom: the job's processes held") and "over the worker's cap of 0.12 GiB" in error


def test_a_nan_in_the_result_fails_the_job_with_the_reason_and_the_loop_goes_on() -> None:
    server = FakeServer(jobs=[{"kind": "padding"}])
    sup = supervisor(server, "return_nan_result", once=True)
    sup.run()
    assert server.actions()[-1] == "fail" and "flops_per_token" in server.last("fail")["error"]
    assert sup.jobs_run == 1


def test_nul_characters_from_the_child_do_not_break_the_report() -> None:
    server = FakeServer()
    run_one(server, "raise_with_nul", {"kind": "padding"})
    assert server.last("fail")["error"] == "error: ValueError: bad byte \ufffd in input"


def test_a_report_the_server_does_not_answer_is_retried_and_the_result_kept_until_then(tmp_path: Path) -> None:
    server = FakeServer(down_for_reports=3)
    sup = run_one(server, "finish_with_progress", {"kind": "padding"}, outbox_dir=tmp_path / "outbox",
                  error_poll_max_s=0.2)
    assert server.actions().count("complete") == 4 and server.actions()[-1] == "complete"
    assert sup.outbox is not None and sup.outbox.pending() == []
    assert (tmp_path / "outbox").stat().st_mode & 0o777 == 0o700


def test_a_result_unreported_when_the_worker_stopped_is_delivered_at_the_next_start(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    server = FakeServer(down_for_reports=1000)
    sup = supervisor(server, "finish_with_progress", outbox_dir=outbox, error_poll_max_s=0.1)
    server.when_down = sup.request_stop  # stopped while the server is down: the retries end, the result stays
    sup.run_lease(LeaseOut.model_validate(lease_body({"kind": "padding"})))
    assert server.actions().count("complete") == 1 and "fail" not in server.actions()
    assert sup.outbox is not None and [p.job_id for p in sup.outbox.pending()] == [5]
    saved = next(outbox.glob("job-*.json"))
    assert saved.stat().st_mode & 0o777 == 0o600
    restarted_server = FakeServer(jobs=[{"kind": "padding"}])  # --once returns after this next job
    restarted = supervisor(restarted_server, "finish_with_progress", outbox_dir=outbox, once=True)
    restarted.run()
    assert restarted_server.actions()[:2] == ["workers", "complete"]
    assert restarted_server.last("complete")["lease_token"] == "lease-abc"
    assert not saved.exists()


def test_a_spec_naming_a_file_outside_the_roots_fails_without_running_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = FakeServer()
    escaping = {"pid_file": str(pid_file), "data": {"source": "/etc/passwd", "tokenizer": "bert-base-uncased"}}
    run_one(server, "run_until_killed", escaping, data_roots=(tmp_path,))
    assert server.last("fail")["error"].startswith("error: data.source: '/etc/passwd' must be relative")
    assert not pid_file.exists()


def test_a_hub_data_source_naming_a_local_path_fails_without_running_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = FakeServer()
    escaping = {"pid_file": str(pid_file), "data": {"source": "hf:../..", "tokenizer": "bert-base-uncased"}}
    run_one(server, "run_until_killed", escaping)
    assert server.last("fail")["error"].startswith("error: spec: data.source: '../..' is not a Hub data set id")
    assert not pid_file.exists()
