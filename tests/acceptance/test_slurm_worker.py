"""`padbench worker --slurm` against a real Slurm (slurmctld + slurmd on this host, see slurm_cluster.py): a job
claimed from a real server on loopback runs as a Slurm job to its verdict, a job across two nodes stays queued
for a worker whose partition has one node, a cancel on the server reaches the Slurm job as scancel, the two nodes
of a job across nodes meet at the first one's rendezvous as Slurm tells them to, and a host without Slurm refuses
to start the worker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from padbench.client.api import PadbenchClient
from padbench.client.demo import background, padbench_command
from padbench.contract.api import JobOut, JobStatus
from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.jobs import spec_json
from padbench.worker.runtime.jobdir import JobDirectory, RunOrder, job_report
from padbench.worker.supervisor import slurm
from padbench.worker.supervisor.backend import JobRun
from padbench.worker.supervisor.slurm_backend import SlurmWatch, rank_command
from tests.acceptance.conftest import LiveServer, Worker
from tests.acceptance.slurm_cluster import SlurmCluster, slurm_cluster
from tests.acceptance.specs import LONG, QUICK

__all__ = ["slurm_cluster"]  # the module's fixture, used by name below


@contextmanager
def slurm_worker(server: LiveServer, cluster: SlurmCluster, name: str) -> Iterator[Worker]:
    log = server.workdir / f"worker-{name}.log"
    command = padbench_command("worker", "--slurm", "--slurm-dir", str(server.workdir / "slurm-jobs"),
                               "--server", server.url, "--name", name)
    with background(command, log, server.env | cluster.env | {"PADBENCH_TOKEN": server.tokens.worker}) as process:
        worker = Worker(name=name, process=process, log=log)
        yield worker


def slurm_jobs_of(cluster: SlurmCluster, job_id: int) -> list[str]:
    """The states Slurm lists for the padbench job's attempts."""
    return [job.split()[1] for job in cluster.jobs() if job.endswith(f" padbench-{job_id}")]


def verdict(server: LiveServer, job_id: int, worker: Worker, cluster: SlurmCluster) -> JobOut:
    """The job once final; a wait that ends first fails with the worker's and Slurm's logs."""
    try:
        return server.wait_for(job_id, lambda job: job.status.is_final)
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- worker\n{worker.log_text()}\n{cluster.logs()}") from None


@pytest.mark.slow
def test_a_job_runs_on_slurm_to_its_verdict_and_a_cancel_reaches_scancel(
    live_server: LiveServer, slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    with slurm_worker(live_server, slurm_cluster, "slurm") as worker, live_server.client() as client:
        # Older than the one-node job, so the claim would take it first if the worker could: its partition
        # has one node, which is what the worker tells the server, and it joins no gang.
        across_id = client.submit(QUICK | {"nodes": 2, "gpus": 1}).id
        job_id = client.submit(QUICK).id
        done = verdict(live_server, job_id, worker, slurm_cluster)
        assert done.status is JobStatus.succeeded, f"{done.error}\n{worker.log_text()}\n{slurm_cluster.logs()}"
        assert done.worker == "slurm"
        result = client.results(done.id)
        assert isinstance(result, PaddingResult)
        assert [row.strategy for row in result.strategies] == ["static", "packed"]
        assert all(row.status == "ok" and row.tokens_per_s for row in result.strategies)
        assert slurm_jobs_of(slurm_cluster, done.id) == ["COMPLETED"]
        # What the worker offered the server, a node of the partition said, through srun, at the worker's start.
        assert [job.split()[1] for job in slurm_cluster.jobs() if job.endswith(" padbench-detect")] == ["COMPLETED"]
        with PadbenchClient(live_server.url, live_server.tokens.viewer) as viewer:
            registered = [each for each in viewer.workers() if each.name == "slurm"]
        assert [each.capabilities.max_nodes for each in registered] == [slurm.partition_nodes(None)] == [1]
        across = client.job(across_id)
        assert across.status is JobStatus.queued and not slurm_jobs_of(slurm_cluster, across_id)
        assert across.waiting_reason is not None and "scheduler with 2 nodes" in across.waiting_reason
        client.cancel(across_id)

        long_id = client.submit(LONG).id
        # Progress that padbench-rank wrote on the node, carried by the worker's heartbeats.
        running = live_server.wait_for(long_id, lambda job: job.status is JobStatus.running
                                       and bool(job.progress_message) and "Slurm job" not in job.progress_message)
        assert slurm_jobs_of(slurm_cluster, long_id) == ["RUNNING"], running
        client.cancel(long_id)
        cancelled = verdict(live_server, long_id, worker, slurm_cluster)
    assert cancelled.status is JobStatus.cancelled
    assert slurm_jobs_of(slurm_cluster, long_id) == ["CANCELLED"]
    assert "cancelling it (scancel)" in worker.log_text()
    assert not list((live_server.workdir / "slurm-jobs").iterdir())  # each attempt's directory is removed


def test_a_slurm_job_that_ends_without_a_report_fails_with_slurms_words(slurm_cluster: SlurmCluster,
                                                                         tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # What a node that never started padbench-rank (a broken install, a failed node) leaves behind: no report.
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    directory = JobDirectory(tmp_path / "job")
    directory.create(RunOrder(target="unused:target", spec_text="{}", ranks_per_node=1))
    script = tmp_path / "broken.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --error={directory.path}/slurm-%j.err\n#SBATCH --output=/dev/null\n"
                      "echo 'padbench-rank: No such file or directory' >&2\nexit 3\n")
    slurm_id = slurm.submit(script, dict(os.environ))
    run = JobRun(job_id=1, attempt=1, spec=parse_job_spec(QUICK), gpus=(), ranks=1, on_progress=lambda *_: None,
                 on_finished=lambda _: None, should_stop=lambda: False)
    report = SlurmWatch(run, directory, slurm_id, nodes=1, poll_s=0.2).until_finished()
    assert report.outcome == "crash"
    assert report.error == (f"Slurm job {slurm_id} ended FAILED (reason NonZeroExitCode, exit code 3:0) without a "
                            "report from padbench-rank; its stderr ends: padbench-rank: No such file or directory")


def test_a_lost_lease_or_a_stop_of_the_worker_cancels_the_slurm_job(slurm_cluster: SlurmCluster, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The supervisor's `should_stop` covers a cancel, a lost lease and a stop request alike.
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    directory = JobDirectory(tmp_path / "job")
    directory.create(RunOrder(target="unused:target", spec_text="{}", ranks_per_node=1))
    script = tmp_path / "long.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=padbench-lost\n#SBATCH --output=/dev/null\nsleep 300\n")
    slurm_id = slurm.submit(script, dict(os.environ))
    run = JobRun(job_id=2, attempt=1, spec=parse_job_spec(QUICK), gpus=(), ranks=1, on_progress=lambda *_: None,
                 on_finished=lambda _: None, should_stop=lambda: True)
    report = SlurmWatch(run, directory, slurm_id, nodes=1, poll_s=0.2).until_finished()
    assert report.outcome == "cancelled" and slurm_id in (report.error or "")
    assert f"{slurm_id} CANCELLED padbench-lost" in slurm_cluster.jobs()


def test_a_job_slurm_never_held_is_unknown_and_a_controller_that_does_not_answer_is_an_error(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert slurm.job_state("999999") is None  # the watch ends: nothing of it is left to wait for
    # A command that fails for another reason (here: scontrol gone) says nothing of the job, which may run on:
    # the watch asks again rather than ending the run.
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(slurm.SlurmError, match="`scontrol` could not run"):
        slurm.job_state("1")


@pytest.mark.slow
def test_two_nodes_of_a_job_meet_at_the_first_nodes_rendezvous(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    # What srun hands each task of a two-node allocation, both "nodes" being this host (a one-node cluster cannot
    # allocate two): padbench-rank reads the node list through scontrol, node 0 hosts the store.
    directory = JobDirectory(tmp_path / "job")
    spec = parse_job_spec(QUICK | {"nodes": 2, "gpus": 1, "strategies": ["packed"]})
    directory.create(RunOrder(target="padbench.worker.jobs:run_job", spec_text=spec_json(spec), ranks_per_node=1,
                              nodes=2, timeout_s=240, worker="slurm-test"))
    allocation = slurm_cluster.env | {"SLURM_JOB_NODELIST": f"{slurm_cluster.node},{slurm_cluster.node}",
                                      "SLURM_JOB_ID": str(os.getpid())}
    nodes = [subprocess.Popen([*rank_command(), str(directory.path)], env=os.environ | allocation | {
        "SLURM_NODEID": str(node)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for node in (0, 1)]
    said = [node.communicate(timeout=240)[1].decode(errors="replace") for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], said
    reports = directory.reports(2)
    # Each node reports; only the one torch gave global rank 0 carries the result.
    assert [report.outcome for report in reports] == ["ok", "ok"]
    assert sum(report.value is not None for report in reports) == 1
    report = job_report(reports, 2)
    assert report is not None
    result = PaddingResult.model_validate(report.value)
    assert result.strategies[0].status == "ok" and result.strategies[0].tokens_per_s
    assert result.parallel is not None and result.parallel.gpus == 2  # ranks in all: one on each node
    # Each node named as Slurm numbered it (SLURM_NODEID), with the worker that submitted the job.
    assert sorted((node.node_rank, node.worker, len(node.ranks)) for node in result.parallel.nodes) == [
        (0, "slurm-test", 1), (1, "slurm-test", 1)]


def test_the_worker_refuses_to_start_without_slurm(tmp_path: Path) -> None:
    # A PATH that holds this Python but none of Slurm's commands.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PADBENCH_", "SLURM_"))}
    done = subprocess.run(padbench_command("worker", "--slurm", "--server", "http://127.0.0.1:9", "--token", "x"),
                          env=env | {"PATH": str(bare)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "padbench worker --slurm: Slurm's `sbatch` is not on PATH" in done.stderr
    # GPUs of this host mean nothing to a worker whose jobs run on the cluster's nodes.
    done = subprocess.run(padbench_command("worker", "--slurm", "--gpus", "0", "--server", "http://127.0.0.1:9",
                                           "--token", "x"), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--gpus and --gpu name this host's GPUs" in done.stderr


def test_the_worker_refuses_a_job_directory_it_cannot_create(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PADBENCH_")} | slurm_cluster.env
    done = subprocess.run(padbench_command("worker", "--slurm", "--slurm-dir", str(tmp_path / "a-file" / "jobs"),
                                           "--server", "http://127.0.0.1:9", "--token", "x"),
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"padbench worker --slurm: --slurm-dir {tmp_path / 'a-file' / 'jobs'}: cannot be created" in done.stderr
