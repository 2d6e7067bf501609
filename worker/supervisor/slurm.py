"""Slurm's own commands, as a worker that submits to a cluster uses them: sinfo, sbatch, scontrol, sacct, scancel.

Only the client commands are used, never Slurm's C API or REST daemon: they are what every cluster with Slurm
has on its login nodes, and they read the cluster's configuration (`SLURM_CONF`, or the default) as a user's
own `sbatch` does. Each call has a time limit, so a controller that stops answering fails a call rather than
hanging the worker.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT_S = 60.0
# States after which a Slurm job runs no more (`man squeue`, JOB STATE CODES).
FINISHED_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                             "PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"})


class SlurmUnavailable(RuntimeError):
    """No Slurm client here, or no controller answering it: the message says which."""


class SlurmError(RuntimeError):
    """A Slurm command refused or failed; the message carries its own words."""


@dataclass(frozen=True)
class SlurmJobState:
    state: str  # PENDING, RUNNING, COMPLETED, … (the first word of Slurm's JobState)
    reason: str  # why it waits or ended (Resources, NonZeroExitCode, …), "None" when there is none
    exit_code: str  # "CODE:SIGNAL" as Slurm prints it

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def run_command(*command: str, timeout_s: float = COMMAND_TIMEOUT_S, stdin: str | None = None,
                env: dict[str, str] | None = None) -> str:
    """The command's standard output; SlurmError with its stderr when it fails or does not answer in time."""
    try:
        done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout_s, env=env,
                              check=False)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(command)}` did not answer within {timeout_s:.0f} s") from None
    except OSError as error:
        raise SlurmError(f"`{command[0]}` could not run: {error}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise SlurmError(f"`{' '.join(command)}` failed (exit {done.returncode}): {said[-1] if said else 'no output'}")
    return done.stdout


def check_available(partition: str | None) -> None:
    """Raise SlurmUnavailable unless sbatch is installed and the controller answers (for `partition`, if named)."""
    for command in ("sbatch", "srun", "sinfo", "scontrol", "scancel"):
        if shutil.which(command) is None:
            raise SlurmUnavailable(f"Slurm's `{command}` is not on PATH: this host cannot submit to a Slurm cluster")
    try:
        listed = run_command("sinfo", "--noheader", "--format=%R", timeout_s=30)
    except SlurmError as error:
        raise SlurmUnavailable(f"no Slurm controller answers here: {error}") from None
    partitions = listed.split()
    if partition is not None and partition not in partitions:
        raise SlurmUnavailable(f"Slurm has no partition {partition!r} (it has: {', '.join(partitions) or 'none'})")


@dataclass(frozen=True)
class NodeShape:
    """What one node of the partition offers a job: its CPUs and GPUs (the smallest node's, so any fits), and
    how many nodes one job may span there."""

    cpus: int
    gpus: int
    nodes: int = 1


_GPU_GRES = re.compile(r"gpu(?::[^:(,]+)?:(\d+)")


def node_shape(partition: str | None) -> NodeShape:
    """The CPUs and GPUs (GRES `gpu`) of the partition's smallest node, as sinfo lists them."""
    command = ["sinfo", "--noheader", "--format=%c|%G"] + (["--partition", partition] if partition else [])
    rows = [line.split("|", 1) for line in run_command(*command).splitlines() if "|" in line]
    if not rows:
        raise SlurmError(f"sinfo lists no nodes{f' in partition {partition}' if partition else ''}")
    cpus = min(int(re.sub(r"\D.*", "", cpu) or 1) for cpu, _ in rows)
    gpus = min(sum(int(count) for count in _GPU_GRES.findall(gres)) for _, gres in rows)
    return NodeShape(cpus=cpus, gpus=gpus, nodes=partition_nodes(partition))


def partition_nodes(partition: str | None) -> int:
    """How many nodes one job may span in `partition` (None: the cluster's default one, marked `*` by sinfo):
    its nodes, bounded by its largest job size (MaxNodes, `%s` printed as `MIN-MAX`); at least 1."""
    return job_span(run_command("sinfo", "--noheader", "--Node", "--format=%N|%P|%s"), partition)


def job_span(listed: str, partition: str | None) -> int:
    """`partition_nodes` from sinfo's `NODE|PARTITION|JOB_SIZE` lines (one per node and partition)."""
    names: set[str] = set()
    largest_job: int | None = None
    for line in listed.splitlines():
        name, listed_partition, job_size = [*line.split("|"), "", ""][:3]
        chosen = listed_partition.rstrip("*") == partition if partition else listed_partition.endswith("*")
        if chosen:
            names.add(name)
            most = job_size.rpartition("-")[2]
            largest_job = int(most) if most.isdigit() else largest_job  # `infinite`: no bound
    return max(1, min(len(names), largest_job) if largest_job is not None else len(names))


def submit(script: Path, env: dict[str, str]) -> str:
    """Submit a batch script; the Slurm job id."""
    said = run_command("sbatch", "--parsable", str(script), env=env).strip()
    job_id = said.split(";", 1)[0]  # `--parsable` prints "ID" or "ID;CLUSTER"
    if not job_id.isdigit():
        raise SlurmError(f"sbatch answered {said!r}, not a job id")
    return job_id


# What scontrol says of a job its controller no longer holds (or never did).
FORGOTTEN_JOB = "Invalid job id specified"
_FIELD = re.compile(r"(?:^|\s)(JobState|Reason|ExitCode)=(\S*)")


def job_state(job_id: str) -> SlurmJobState | None:
    """The job's state from the controller (`scontrol`), else from accounting (`sacct`) once the controller has
    forgotten it (past its MinJobAge); None when neither knows it. A controller that does not answer raises
    SlurmError: the job may well be running, so that is no end of it."""
    try:
        fields = dict(_FIELD.findall(run_command("scontrol", "show", "job", "--oneliner", job_id)))
    except SlurmError as error:
        if FORGOTTEN_JOB not in str(error):
            raise
    else:
        if "JobState" in fields:
            return SlurmJobState(fields["JobState"], fields.get("Reason", "None"), fields.get("ExitCode", "0:0"))
    try:
        said = run_command("sacct", "--jobs", job_id, "--allocations", "--noheader", "--parsable2",
                           "--format=State,Reason,ExitCode")
    except SlurmError:
        return None  # accounting off (a small cluster) or not answering
    for line in said.splitlines():
        state, reason, exit_code = [*line.split("|"), "", "", ""][:3]
        if state:
            return SlurmJobState(state.split()[0], reason or "None", exit_code or "0:0")
    return None


def cancel(job_id: str) -> None:
    """Ask Slurm to end the job (its steps get SIGTERM, then SIGKILL after the cluster's KillWait)."""
    run_command("scancel", job_id)
