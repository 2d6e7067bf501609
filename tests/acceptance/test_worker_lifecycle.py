"""One real server and a real worker process (two for the last test): a job's whole life, failure, cancel of a
running job, every CLI command, and exclusive claims."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from padbench.contract.api import JobStatus
from padbench.kinds.generate.contract import GenerateResult
from padbench.kinds.padding.contract import PaddingResult
from tests.acceptance.conftest import LiveServer, Worker, process_gone, read_proc, running_worker
from tests.acceptance.specs import FAILING, GENERATE, LONG, MISSING_MODEL, QUICK

pytestmark = pytest.mark.slow


def test_submit_claim_heartbeat_complete_results(shared_server: LiveServer, shared_worker: Worker) -> None:
    with shared_server.client() as client:
        # The worker process advertises the labels it was started with; the job goes only to such a worker.
        job_id = client.submit(QUICK | {"worker_labels": ["Acceptance"]}).id
        seen_running_progress = []
        job = client.wait(job_id, poll_s=0.1, on_update=lambda j: seen_running_progress.append(
            j.progress) if j.status is JobStatus.running and j.progress is not None else None)
        assert job.status is JobStatus.succeeded, job.error
        assert job.worker == "shared" and job.attempts == 1
        assert seen_running_progress, "no heartbeat carried progress while the job ran"
        result = client.results(job_id)
    assert isinstance(result, PaddingResult)
    assert [s.strategy for s in result.strategies] == ["static", "packed"]
    assert all(s.status == "ok" and s.tokens_per_s for s in result.strategies)
    # The supervisor parent never loaded torch: only its children did.
    maps = read_proc(shared_worker.process.pid, "maps")
    assert b"libtorch" not in maps and b"libcuda" not in maps


def test_a_generate_job_runs_end_to_end_over_http(shared_server: LiveServer, shared_worker: Worker) -> None:
    with shared_server.client() as client:
        job = client.wait(client.submit(GENERATE).id, poll_s=0.2)
        assert job.status is JobStatus.succeeded, job.error
        result = client.results(job.id)
    assert isinstance(result, GenerateResult)
    assert [row.strategy for row in result.rows] == ["static", "sorted", "continuous", "transformers-generate"]
    assert all(row.status == "ok" and row.output_tokens_per_s for row in result.rows)
    assert all(row.correctness_passed for row in result.rows if not row.reference)
    assert result.rows[-1].reference and result.output_tokens_total == sum(
        row.output_tokens or 0 for row in result.rows[:1])


def test_a_job_failing_inside_its_child_records_the_error(shared_server: LiveServer, shared_worker: Worker) -> None:
    with shared_server.client() as client:
        job_id = client.submit(FAILING).id
        job = client.wait(job_id, poll_s=0.1, timeout_s=120)
    assert job.status is JobStatus.failed
    assert job.error and MISSING_MODEL in job.error
    assert job.attempts == 1  # a reported failure is final; only lost leases are retried


def test_cancel_of_a_running_job_stops_its_child(shared_server: LiveServer, shared_worker: Worker) -> None:
    with shared_server.client() as client:
        job_id = client.submit(LONG).id
        shared_server.wait_for(job_id, lambda j: j.status is JobStatus.running and j.progress is not None)
        children = shared_worker.job_children()
        assert len(children) == 1
        client.cancel(job_id)
        job = client.wait(job_id, poll_s=0.2, timeout_s=60)
    assert job.status is JobStatus.cancelled
    assert process_gone(children[0])
    assert shared_worker.process.poll() is None  # the worker itself carries on


def test_every_cli_command_against_the_live_server(
    shared_server: LiveServer, shared_worker: Worker, tmp_path: Path
) -> None:
    spec = tmp_path / "quick.yaml"
    spec.write_text(yaml.safe_dump(QUICK))
    submitted = shared_server.cli("submit", str(spec), "--wait")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stderr.split()[1]
    assert "static" in submitted.stdout and "packed" in submitted.stdout  # the results table

    assert shared_server.cli("wait", job_id).stdout.strip() == f"job {job_id} succeeded"
    status = shared_server.cli("status", job_id)
    assert "succeeded" in status.stdout and "shared" in status.stdout
    for fmt, marker in (("table", "packed"), ("json", '"kind": "padding"'), ("csv", ",")):
        rendered = shared_server.cli("results", job_id, "--format", fmt)
        assert rendered.returncode == 0 and marker in rendered.stdout, rendered.stderr
    output = tmp_path / "results.csv"
    assert shared_server.cli("results", job_id, "--format", "csv", "--output", str(output)).returncode == 0
    assert output.read_text().splitlines()[0].count(",") > 3

    listed = shared_server.cli("list", "--status", "succeeded", "--limit", "50")
    assert any(line.split()[0] == job_id for line in listed.stdout.splitlines()[1:-1])

    queued = shared_server.cli("submit", str(spec))  # no --wait: cancel it, queued or already running
    cancel = shared_server.cli("cancel", queued.stdout.split()[1])
    assert cancel.returncode == 0 and "cancel" in cancel.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: padding\nbatch_size: 0\n")
    refused = shared_server.cli("submit", str(bad))
    assert refused.returncode != 0 and "batch_size" in refused.stderr

    missing = shared_server.cli("results", "999999")
    assert missing.returncode == 1 and "HTTP 404" in missing.stderr


def test_two_workers_never_get_the_same_job(shared_server: LiveServer, shared_worker: Worker) -> None:
    with running_worker(shared_server, "second") as second:
        with shared_server.client() as client:
            job_ids = [client.submit(QUICK | {"name": f"pair-{n}"}).id for n in range(3)]
            jobs = [client.wait(job_id, poll_s=0.2, timeout_s=150) for job_id in job_ids]
        logs = shared_worker.log_text() + second.log_text()
    assert all(job.status is JobStatus.succeeded for job in jobs), [job.error for job in jobs]
    assert all(job.attempts == 1 for job in jobs)
    claims = [int(n) for n in re.findall(r"job (\d+) \(padding\) claimed", logs)]
    assert sorted(n for n in claims if n in job_ids) == sorted(job_ids)  # each claimed once, by one worker
