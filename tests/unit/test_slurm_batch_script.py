"""The batch script `padbench worker --slurm` submits: one padbench-rank task per node, GPUs asked for only when
the job holds some, CPUs otherwise, and Slurm's time limit past the job's own; and a job directory that cannot be
written fails the run rather than the worker; the nodes one job may span in a partition, read from sinfo's lines.
(The real scheduler runs jobs in test_slurm_worker.py.)"""

from __future__ import annotations

import shlex
from pathlib import Path

from padbench.contract.kinds import parse_job_spec
from padbench.worker.runtime.jobdir import JobDirectory
from padbench.worker.supervisor import slurm
from padbench.worker.supervisor.backend import JobRun
from padbench.worker.supervisor.slurm_backend import SlurmBackend, SlurmOptions, batch_script, rank_command
from tests.acceptance.specs import QUICK


def job_run(gpus: tuple[str, ...]) -> JobRun:
    return JobRun(job_id=7, attempt=1, spec=parse_job_spec(QUICK), gpus=gpus, ranks=max(len(gpus), 1),
                  on_progress=lambda *_: None, on_finished=lambda _: None, should_stop=lambda: False)


def directives(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_a_cpu_job_asks_for_the_cpus_of_a_node_and_no_gpu(tmp_path: Path) -> None:
    directory = JobDirectory(tmp_path / "job")
    script = batch_script(job_run(()), directory, SlurmOptions(tmp_path, cpus_per_node=16), nodes=1,
                          time_limit_s=3600)
    asked = directives(script)
    assert "--cpus-per-task=16" in asked and not any(line.startswith("--gres") for line in asked)
    assert "--nodes=1" in asked and "--ntasks-per-node=1" in asked
    assert "--time=70" in asked  # the job's hour, and ten minutes for the job's own deadline to fire first
    assert script.splitlines()[-1] == (f"exec srun --nodes=1 --ntasks-per-node=1 --kill-on-bad-exit=1 "
                                       f"{shlex.join([*rank_command(), str(directory.path)])}")


def test_a_gpu_job_asks_for_its_gpus_on_each_of_its_nodes(tmp_path: Path) -> None:
    options = SlurmOptions(tmp_path, partition="h100", sbatch_args=("--account=lab",), gpus_per_node=8)
    asked = directives(batch_script(job_run(("0", "1", "2", "3")), JobDirectory(tmp_path / "job"), options,
                                    nodes=2, time_limit_s=60))
    assert "--gres=gpu:4" in asked and "--nodes=2" in asked and "--partition=h100" in asked
    assert not any(line.startswith("--cpus-per-task") for line in asked)
    assert asked[-1] == "--account=lab"  # the operator's own options come last, so they win


def test_a_job_directory_that_cannot_be_written_fails_the_run_without_raising(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    backend = SlurmBackend(SlurmOptions(tmp_path / "a-file"), "w", "padbench.worker.jobs:run_job", 60, None)
    report = backend.run(job_run(()))
    assert report.outcome == "error"
    assert report.error is not None and report.error.startswith("could not write the job's directory")


def test_the_nodes_a_job_may_span_are_the_partitions_bounded_by_its_largest_job() -> None:
    """sinfo --Node --format=%N|%P|%s: a node once per partition (and per state), `*` on the default one."""
    listed = "\n".join(["gpu-1|h100*|1-infinite", "gpu-2|h100*|1-infinite", "gpu-2|h100*|1-infinite",
                        "gpu-3|h100*|1-infinite", "gpu-1|debug|1-2", "gpu-2|debug|1-2", "gpu-3|debug|1-2",
                        "cpu-1|cpu|1-infinite"])
    assert slurm.job_span(listed, "h100") == slurm.job_span(listed, None) == 3
    assert slurm.job_span(listed, "debug") == 2  # MaxNodes=2
    assert slurm.job_span(listed, "cpu") == 1
    assert slurm.job_span("", None) == 1  # no default partition: jobs across nodes are left to others
