"""A real one-node Slurm cluster for tests: this host's slurmctld and slurmd on private ports and files.

The cluster's configuration, state and logs live in a temporary directory; clients (sbatch, squeue, srun, …)
reach it through SLURM_CONF, so a Slurm the host may already run is left alone. Authentication is MUNGE, with a
daemon of the test's own (its socket and a random key in the directory): slurmctld and slurmd listen on every
interface, and `auth/none`, which 22.05 still ships, would let any host that reaches the ports run commands as
root for as long as the test lasts. The node is this host as `slurmd -C` describes it (its CPUs and memory);
jobs are tracked by process tree (`proctrack/linuxproc`), which needs no cgroups. Tests skip, saying so, where
the Slurm binaries are absent or the tests do not run as root (slurmd must be root to start job steps).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from padbench.client.demo import free_loopback_port

DAEMONS = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged")
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SlurmCluster:
    conf: Path
    folder: Path
    node: str
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=os.environ | self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)

    def jobs(self) -> list[str]:
        """Every job the controller knows, as `ID STATE NAME`."""
        listed = self.command("squeue", "--noheader", "--states=all", "--format=%i %T %j")
        return listed.stdout.split("\n")[:-1]

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                         for log in sorted(self.folder.glob("*.log")))


def missing_binaries() -> str | None:
    """Why a real Slurm cannot run here, or None when it can."""
    absent = [path for path in DAEMONS if not os.access(path, os.X_OK)]
    absent += [name for name in CLIENTS if shutil.which(name) is None]
    return (f"Slurm is not installed here (missing: {', '.join(absent)}; apt-get install slurm-wlm)" if absent
            else None)


def this_node() -> tuple[str, int, int]:
    """This host's node name, CPUs and memory (MB) as slurmd itself sees them."""
    said = subprocess.run(["/usr/sbin/slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    fields = dict(re.findall(r"(\w+)=(\S+)", said.splitlines()[0]))
    return fields["NodeName"], int(fields["CPUs"]), int(fields["RealMemory"])


def write_conf(folder: Path, node: str, cpus: int, memory_mb: int) -> Path:
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    lines = {
        "ClusterName": "padbench-test", "SlurmctldHost": "localhost",
        "SlurmctldPort": free_loopback_port(), "SlurmdPort": free_loopback_port(),
        "AuthType": "auth/munge", "AuthInfo": f"socket={munge_socket(folder)}", "CredType": "cred/munge",
        "SlurmUser": "root", "SlurmdUser": "root",
        "StateSaveLocation": folder / "state", "SlurmdSpoolDir": folder / "spool",
        "SlurmctldPidFile": folder / "slurmctld.pid", "SlurmdPidFile": folder / "slurmd.pid",
        "SlurmctldLogFile": folder / "slurmctld.log", "SlurmdLogFile": folder / "slurmd.log",
        "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none", "MpiDefault": "none",
        "JobAcctGatherType": "jobacct_gather/none", "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none", "SelectType": "select/cons_tres", "SelectTypeParameters": "CR_Core",
        "ReturnToService": 2, "KillWait": 5, "MinJobAge": 600,
        "NodeName": f"{node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        "PartitionName": f"debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    }
    conf = folder / "slurm.conf"
    conf.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return conf


def munge_socket(folder: Path) -> Path:
    return folder / "munge" / "munge.sock"


def munge_command(folder: Path) -> list[str]:
    """munged in the foreground with a new random key, its socket and files in `folder`/munge (private)."""
    private = folder / "munge"
    private.mkdir(mode=0o700)
    key = private / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    # --force: munged refuses a socket directory that others cannot search; only root uses this one.
    return ["/usr/sbin/munged", "--foreground", "--force", f"--socket={munge_socket(folder)}", f"--key-file={key}",
            f"--pid-file={private / 'munged.pid'}", f"--log-file={private / 'munged.log'}",
            f"--seed-file={private / 'munged.seed'}"]


def wait_for_munge(folder: Path, munged: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not munge_socket(folder).exists():
        if munged.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"munged did not start:\n{(folder / 'munged.out.log').read_text(errors='replace')}")
        time.sleep(0.05)


def wait_until_idle(cluster: SlurmCluster, daemons: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(daemon.poll() is not None for daemon in daemons):
            raise RuntimeError(f"a Slurm daemon exited at start:\n{cluster.logs()}")
        said = cluster.command("sinfo", "--noheader", "--format=%T")
        if said.returncode == 0 and said.stdout.split() == ["idle"]:
            return
        time.sleep(0.2)
    raise RuntimeError(f"the Slurm node never became idle:\n{cluster.logs()}")


@contextmanager
def daemon(command: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@contextmanager
def running_slurm(folder: Path) -> Iterator[SlurmCluster]:
    """munged, slurmctld and slurmd in the foreground as this test's children, until the block ends; any job left
    is cancelled first, so no job step outlives the cluster."""
    node, cpus, memory_mb = this_node()
    cluster = SlurmCluster(conf=write_conf(folder, node, cpus, memory_mb), folder=folder, node=node, cpus=cpus)
    env = os.environ | cluster.env
    with ExitStack() as stack:
        munged = stack.enter_context(daemon(munge_command(folder), folder / "munged.out.log", env))
        wait_for_munge(folder, munged)
        started = [munged, stack.enter_context(daemon(["/usr/sbin/slurmctld", "-D", "-f", str(cluster.conf)],
                                              folder / "slurmctld.out.log", env)),
                   stack.enter_context(daemon(["/usr/sbin/slurmd", "-D", "-N", node, "-f", str(cluster.conf)],
                                              folder / "slurmd.out.log", env))]
        wait_until_idle(cluster, started)
        try:
            yield cluster
        finally:
            cancel_every_job(cluster)


def cancel_every_job(cluster: SlurmCluster) -> None:
    cluster.command("scancel", "--full", "--partition=debug")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(" RUNNING " in f" {job} " or "COMPLETING" in job
                                              for job in cluster.jobs()):
        time.sleep(0.2)


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = missing_binaries()
    if reason is not None:
        pytest.skip(reason)
    if os.geteuid() != 0:  # slurmstepd sets the job's user and groups before it starts a step
        pytest.skip("a private Slurm cluster needs root here: slurmd starts each job step as the job's user")
    with running_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
