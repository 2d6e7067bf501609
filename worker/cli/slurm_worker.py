"""`padbench worker --slurm`: the worker's options for a Slurm cluster, and what it learns from the cluster at start.

The worker runs on a host that can submit (a login node) and hands each job it claims to Slurm. It refuses to
start where Slurm is not installed or its controller does not answer. What it tells the server it can run is
what a node of its partition runs: `padbench-rank --capabilities` is run there once, through `srun`, with the
node's GPUs (GRES `gpu`) or CPUs — the login node may have no GPU at all — and how many nodes one job may span
in the partition (`sinfo`), the most nodes of a job it claims whole.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
from pathlib import Path

from padbench.contract.api import Capabilities
from padbench.contract.parallel import MAX_NODES
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.supervisor import slurm
from padbench.worker.supervisor.slurm_backend import SlurmOptions, job_environment, rank_command

# One allocation to look at a node; it waits in the queue like any job, so it may take a while on a busy cluster.
DETECT_TIME_LIMIT_MINUTES = 10


def add_slurm_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Slurm", "hand each claimed job to a Slurm cluster "
                                               "(docs/running-across-nodes.md)")
    group.add_argument("--slurm", action="store_true",
                       help="submit each claimed job to Slurm (sbatch + srun padbench-rank) instead of running it "
                            "here; refuses to start without a Slurm client and a controller that answers")
    group.add_argument("--slurm-partition", default=None, metavar="NAME", help="the partition jobs go to "
                       "(default: the cluster's default partition)")
    group.add_argument("--slurm-dir", type=Path, default=None, metavar="PATH",
                       help="where job directories go: a file system the nodes share with this host "
                            "(default: CACHE_DIR/slurm, i.e. under $PADBENCH_CACHE_DIR or ~/.cache/padbench)")
    group.add_argument("--slurm-arg", action="append", default=[], metavar="ARG", dest="slurm_args",
                       help="an option passed to sbatch and srun as it is (repeatable: --slurm-arg=--account=lab "
                            "--slurm-arg=--qos=high)")


class SlurmStartRefused(RuntimeError):
    """The worker cannot use Slurm here; the message says why."""


def slurm_options(args: argparse.Namespace, settings: WorkerSettings) -> SlurmOptions:
    """Check that Slurm answers here and read its partition's nodes; SlurmStartRefused says what is missing."""
    if args.gpus is not None or args.gpu is not None:
        raise SlurmStartRefused("--gpus and --gpu name this host's GPUs; a Slurm worker offers those of a node of "
                                "its partition (its GRES), so leave them out")
    try:
        slurm.check_available(args.slurm_partition)
        shape = slurm.node_shape(args.slurm_partition)
    except (slurm.SlurmUnavailable, slurm.SlurmError) as error:
        raise SlurmStartRefused(str(error)) from None
    directory = args.slurm_dir or settings.cache_dir / "slurm"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise SlurmStartRefused(f"--slurm-dir {directory}: cannot be created ({error.strerror})") from None
    return SlurmOptions(directory=directory.resolve(), partition=args.slurm_partition,
                        sbatch_args=tuple(args.slurm_args), cpus_per_node=shape.cpus, gpus_per_node=shape.gpus,
                        nodes=shape.nodes)


def node_capabilities(options: SlurmOptions, stop: threading.Event) -> tuple[Capabilities, float]:
    """What a node of the partition runs, and its CPU's matrix-multiply rate (FLOP/s), asked on the node; the
    capabilities say too how many nodes one job may span in the partition (`max_nodes`), so the server hands
    the worker a `nodes: M` job whole when the partition has M nodes (Slurm places them)."""
    resources = (f"--gres=gpu:{options.gpus_per_node}" if options.gpus_per_node
                 else f"--cpus-per-task={options.cpus_per_node}")
    command = ["srun", "--nodes=1", "--ntasks=1", f"--time={DETECT_TIME_LIMIT_MINUTES}", "--job-name=padbench-detect",
               *([f"--partition={options.partition}"] if options.partition else []), resources,
               *options.sbatch_args, *rank_command(), "--capabilities"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=job_environment(), cwd=options.directory) as process:
        while True:
            try:
                out, err = process.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stop.is_set():
                    process.terminate()
                    raise SlurmStartRefused("stopped while waiting for a node to report its capabilities") from None
    lines = out.strip().splitlines()
    if process.returncode != 0 or not lines:
        said = (err or out).strip().splitlines()
        raise SlurmStartRefused(f"`srun … padbench-rank --capabilities` failed (exit {process.returncode}): "
                                f"{said[-1] if said else 'no output'}")
    try:
        document = json.loads(lines[-1])
        capabilities = Capabilities.model_validate(document["capabilities"])
        flops = float(document["cpu_matmul_flops"])
    except (ValueError, KeyError, TypeError) as error:
        raise SlurmStartRefused(f"padbench-rank --capabilities printed no capabilities ({error})") from None
    return capabilities.model_copy(update={"max_nodes": min(options.nodes, MAX_NODES)}), flops
