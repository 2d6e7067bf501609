"""The client CLI in-process against a live server on loopback (real HTTP, real SQLite / PostgreSQL).

Jobs are driven through their life by the worker's own HTTP client (`WorkerApi`), with a hand-made,
contract-valid result: what the engine measures is not under test here, the commands are.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import update

from padbench.cli import main
from padbench.contract.api import Capabilities, LeaseOut
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.server.db.clock import db_now
from padbench.server.db.models import Job
from padbench.worker.supervisor.api import WorkerApi
from tests.integration.conftest import LiveServer, result_document
from tests.unit.test_client_display import HOSTILE, HOSTILE_SHOWN, Terminal, assert_nothing_acts_on_the_terminal
from tests.unit.test_report_compare import faster_copy
from tests.unit.test_report_padding import sample_result

SPEC = {"kind": "padding", "name": "cli-test", "device": "cpu", "dtype": "fp32", "attention": "sdpa",
        "strategies": ["static", "packed"]}


@pytest.fixture
def cli(live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    return cli_of(live_server, monkeypatch, capsys)


def cli_of(live_server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`padbench` in this process, as the submitter of `live_server`: (exit status, stdout, stderr)."""
    monkeypatch.setenv("PADBENCH_SERVER", live_server.base_url)
    monkeypatch.setenv("PADBENCH_TOKEN", live_server.tokens["submitter"])

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def claim_one(server: LiveServer) -> tuple[WorkerApi, LeaseOut]:
    api = WorkerApi(server.base_url, server.tokens["worker"])
    worker = api.register("cli-test-worker", Capabilities(device="cpu", kernels=["sdpa"]))
    lease = api.claim(worker.id)
    assert lease is not None
    return api, lease


def test_submit_status_list_and_cancel(cli, spec_file: Path) -> None:
    code, out, _ = cli("submit", str(spec_file))
    assert code == 0 and out.startswith("job ") and out.split()[2] == "queued"
    job_id = out.split()[1]
    code, out, _ = cli("status", job_id)
    assert code == 0 and "queued" in out and "cli-test" in out and "0 of 3" in out
    code, out, _ = cli("list", "--status", "queued")
    assert code == 0 and out.splitlines()[1].split()[:2] == [job_id, "queued"]
    assert cli("cancel", job_id)[1].strip() == f"job {job_id} cancelled"
    code, out, _ = cli("list", "--status", "queued")
    assert "(0 shown" in out


def test_results_in_every_format_after_a_worker_completes(cli, live_server: LiveServer, spec_file: Path,
                                                          tmp_path: Path) -> None:
    job_id = cli("submit", str(spec_file))[1].split()[1]
    api, lease = claim_one(live_server)

    def finish() -> None:  # while `wait` polls: progress first, then the result
        api.heartbeat(lease.job.id, lease.lease_token, 0.5, "static: batch 2/4")
        time.sleep(0.8)
        api.complete(lease.job.id, lease.lease_token, result_document(lease.job.spec))

    thread = threading.Thread(target=finish)
    thread.start()
    code, out, err = cli("wait", job_id)
    thread.join()
    assert code == 0 and out.strip() == f"job {job_id} succeeded"
    assert "succeeded" in err
    code, table, _ = cli("results", job_id)
    assert code == 0 and table.strip()
    code, document, _ = cli("results", job_id, "--format", "json")
    assert json.loads(document)["kind"] == "padding"
    code, _, err = cli("results", job_id, "--format", "csv", "--output", str(tmp_path / "r.csv"))
    assert code == 0 and (tmp_path / "r.csv").exists() and "wrote csv" in err


def test_results_o_picks_the_format_from_the_file_name(cli, live_server: LiveServer, spec_file: Path,
                                                       tmp_path: Path) -> None:
    job_id = finished_jobs(cli, live_server, spec_file)[0]
    assert cli("results", job_id, "-o", str(tmp_path / "r.json"))[0] == 0
    assert JOB_RESULT_ADAPTER.validate_json((tmp_path / "r.json").read_bytes()) == sample_result()
    assert cli("results", job_id, "-o", str(tmp_path / "r.CSV"))[0] == 0
    assert next(csv.DictReader(io.StringIO((tmp_path / "r.CSV").read_text())))["job_id"] == job_id
    code, _, err = cli("results", job_id, "-o", str(tmp_path / "r.txt"))
    assert code == 0 and "wrote table" in err
    assert (tmp_path / "r.txt").read_text().startswith("padding benchmark · gpt2-seed")
    assert cli("results", job_id, "--format", "csv", "-o", str(tmp_path / "really-csv.json"))[0] == 0
    assert (tmp_path / "really-csv.json").read_text().startswith("job_id,")


def test_submit_wait_timeout_stops_waiting_and_leaves_the_job_queued(cli, spec_file: Path) -> None:
    code, _, err = cli("submit", str(spec_file), "--wait", "--timeout", "0.2")
    job_id = err.split()[1]  # `job N queued` goes to stderr with --wait, before the progress bar
    assert code == 1
    assert f"stopped waiting after 0.2 s: job {job_id} is still queued and goes on without this command" in err
    assert f"`padbench wait {job_id}` follows it again" in err
    assert "queued" in cli("status", job_id)[1]
    code, _, err = cli("submit", str(spec_file), "--timeout", "5")
    assert code == 2 and "--timeout goes with --wait" in err
    with pytest.raises(SystemExit) as refused:
        cli("submit", str(spec_file), "--wait", "--timeout", "-1")
    assert refused.value.code == 2


def test_a_failed_job_makes_wait_exit_non_zero_with_its_error(cli, live_server: LiveServer, spec_file: Path) -> None:
    job_id = cli("submit", str(spec_file))[1].split()[1]
    api, lease = claim_one(live_server)
    api.fail(lease.job.id, lease.lease_token, "oom: OutOfMemoryError: CUDA out of memory", "Traceback ...")
    code, _, err = cli("wait", job_id)
    assert code == 1 and "oom: OutOfMemoryError" in err
    code, out, _ = cli("status", job_id)
    assert "failed" in out and "CUDA out of memory" in out


def test_list_and_status_show_a_hostile_name_as_written(cli, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with escape sequences and rich markup, submitted over the API, printed by `list` and `status`:
    piped, and on a terminal (where `list` draws a rich table)."""
    spec = tmp_path / "hostile.json"
    spec.write_text(json.dumps(SPEC | {"name": HOSTILE}))
    job_id = cli("submit", str(spec))[1].split()[1]
    for command in (["list"], ["status", job_id]):
        code, out, _ = cli(*command)
        assert code == 0 and HOSTILE_SHOWN in out
        assert_nothing_acts_on_the_terminal(out)
    monkeypatch.setenv("COLUMNS", "400")  # rich's width when stdout is not a real terminal: no wrapping
    for command in (["list"], ["status", job_id]):
        terminal = Terminal()
        with monkeypatch.context() as patched:
            patched.setattr(sys, "stdout", terminal)
            assert main(command) == 0
        assert HOSTILE_SHOWN in terminal.getvalue()
        assert_nothing_acts_on_the_terminal(terminal.getvalue())


def test_errors_are_one_line_and_non_zero(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: padding\nstrategies: [static]\nmeasurement: {min_batches: 0}\n")
    code, _, err = cli("submit", str(bad))
    assert code == 2 and "measurement.min_batches" in err and err.count("\n") == 1
    code, _, err = cli("results", "4242")
    assert code == 1 and err.strip() == "padbench results: HTTP 404: job 4242 not found"
    monkeypatch.setenv("PADBENCH_TOKEN", "not-a-valid-token-at-all")
    code, _, err = cli("list")
    assert code == 1 and "HTTP 401" in err
    monkeypatch.delenv("PADBENCH_SERVER")
    code, _, err = cli("list")
    assert code == 2 and "--server" in err


# --- results by job ID: CSV identity columns, compare and plot ---------------------------------------

def finished_jobs(cli, live_server: LiveServer, spec_file: Path) -> list[str]:
    """Two jobs completed with measured results: the same run on an H200, then 1.5× faster on an H100."""
    ids = [cli("submit", str(spec_file))[1].split()[1] for _ in range(2)]
    for result in (sample_result(), faster_copy(1.5)):
        api, lease = claim_one(live_server)
        api.complete(lease.job.id, lease.lease_token, JOB_RESULT_ADAPTER.dump_python(result, mode="json"))
    return ids


def test_results_csv_compare_and_plot_by_job_id(cli, live_server: LiveServer, spec_file: Path,
                                                tmp_path: Path) -> None:
    first, second = finished_jobs(cli, live_server, spec_file)
    code, out, _ = cli("results", first, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {row["job_id"] for row in rows} == {first} and rows[0]["gpu"] == "NVIDIA H200"
    code, out, _ = cli("compare", first, second, "--format", "json")
    document = json.loads(out)
    assert code == 0 and [job["job_id"] for job in document["jobs"]] == [int(first), int(second)]
    packed = next(row for row in document["rows"] if row["kernel"] == "torch-flash-varlen")
    assert packed["ratios_vs_first"] == [1.0, 1.5]
    code, out, _ = cli("compare", first, second)
    assert code == 0 and f"× job {first}" in out and "1.50×" in out
    code, _, _ = cli("plot", first, second, "-o", str(tmp_path / "both.svg"))
    assert code == 0 and "NVIDIA H100" in (tmp_path / "both.svg").read_text(encoding="utf-8")


def test_compare_names_a_job_without_results(cli, spec_file: Path) -> None:
    queued = cli("submit", str(spec_file))[1].split()[1]
    code, _, err = cli("compare", queued, queued)
    assert code == 1 and f"job {queued} has no results" in err
def test_the_token_can_come_from_a_file_kept_out_of_ps(cli, live_server: LiveServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADBENCH_TOKEN")
    token_file = tmp_path / "token"
    token_file.write_text(live_server.tokens["submitter"] + "\n")
    code, out, _ = cli("list", "--token-file", str(token_file))
    assert code == 0 and "shown" in out
    monkeypatch.setenv("PADBENCH_TOKEN_FILE", str(token_file))
    assert cli("list")[0] == 0
    code, _, err = cli("list", "--token-file", str(tmp_path / "missing"))
    assert code == 2 and "--token-file" in err and "cannot read it" in err


# --- the fleet: workers and pruning -------------------------------------------------------------------

def test_workers_shows_each_worker_with_its_last_contact_and_running_job(cli, live_server: LiveServer,
                                                                       spec_file: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = cli("submit", str(spec_file))[1].split()[1]
    claim_one(live_server)
    code, _, err = cli("workers")
    assert code == 1 and "HTTP 403" in err  # a submitter token
    monkeypatch.setenv("PADBENCH_TOKEN", live_server.tokens["viewer"])
    code, out, _ = cli("workers")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["NAME", "DEVICE", "GPU", "GPUS", "BUSY", "LABELS", "LAST", "CONTACT",
                                              "RUNNING", "JOBS"]
    assert re.fullmatch(rf"cli-test-worker\s+cpu\s+-\s+-\s+-\s+\d+ s ago\s+{job_id}", lines[1])
    assert lines[2] == "(1 registered)"


def test_prune_removes_old_finished_jobs_for_admins_only(cli, live_server: LiveServer, spec_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    old, kept = (cli("submit", str(spec_file))[1].split()[1] for _ in range(2))
    assert cli("cancel", old)[0] == 0
    with live_server.database.write.begin() as session:  # fake time in SQL: it ended 40 days ago
        session.execute(update(Job).where(Job.id == int(old)).values(finished_at=db_now(-40 * 24 * 3600)))
    code, _, err = cli("prune", "--older-than-days", "30")
    assert code == 1 and "HTTP 403" in err
    monkeypatch.setenv("PADBENCH_TOKEN", live_server.tokens["admin"])
    code, _, err = cli("prune", "--older-than-days", "0")
    assert code == 2 and "--older-than-days must be from 1 to 36500" in err
    code, out, _ = cli("prune", "--older-than-days", "30")
    assert code == 0 and out.strip() == "removed 1 job(s) that finished more than 30 days ago"
    assert [line.split()[0] for line in cli("list")[1].splitlines()[1:-1]] == [kept]


def test_submit_with_set_and_sweep_queues_one_named_job_per_point(cli, spec_file: Path) -> None:
    code, out, _ = cli("submit", str(spec_file), "--set", "measurement.repeats=5", "--sweep", "batch_size=4,auto",
                       "--set", "probe.cpu_memory_budget_bytes=1000000000", "--sweep", "dtype=fp32,bf16")
    assert code == 0, out
    lines = out.splitlines()
    assert [line.split(maxsplit=3)[3] for line in lines] == [
        "batch_size=4,dtype=fp32", "batch_size=4,dtype=bf16",
        "batch_size=auto,dtype=fp32", "batch_size=auto,dtype=bf16"]
    code, status, _ = cli("status", lines[2].split()[1])
    assert "cli-test[batch_size=auto,dtype=fp32]" in status


def test_submit_refuses_an_unknown_override_key_and_queues_nothing(cli, spec_file: Path) -> None:
    code, out, err = cli("submit", str(spec_file), "--sweep", "batch_size=4,8", "--set", "measurement.repeat=5")
    assert code == 2 and out == ""
    assert "--set measurement.repeat: no key 'repeat' in measurement" in err and "'measurement.repeats'" in err
    assert "(0 shown" in cli("list")[1]
