"""`padbench-rank JOB_DIR`: one node's share of a job that a cluster's scheduler started.

`padbench worker --slurm` writes the job's spec into JOB_DIR and submits `srun padbench-rank JOB_DIR`, one task
per node. On each node this command runs the job as a local worker would (`launch_job`: one spawned child, or
one per rank through torch's elastic launcher, with the same time limit and memory cap) and writes what the
local worker's pipe would carry into JOB_DIR: progress, partial results and each node's report (see
`padbench.worker.runtime.jobdir`). A job across several nodes (`nodes: M`) meets at a c10d rendezvous hosted by
the first node of the allocation, each node starting its own ranks through torch's elastic launcher. A SIGTERM
(Slurm's scancel, preemption or time limit) stops the job's processes and still writes the report.

`padbench-rank --capabilities` prints what this node runs (the worker's capabilities, and its CPU's measured
matrix-multiply rate) as JSON: the Slurm worker asks a node of its partition, since the host it runs on may
have no GPU at all.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

from padbench.worker.cli.sizing import cpu_matmul_flops
from padbench.worker.runtime.isolation import ChildReport
from padbench.worker.runtime.jobdir import JobDirectory, RunOrder
from padbench.worker.runtime.launcher import Rendezvous, launch_job
from padbench.worker.runtime.procfs import host_memory_bytes
from padbench.worker.runtime.settings import DEFAULT_JOB_MEMORY_FRACTION
from padbench.worker.supervisor.capabilities import CapabilityError, detect_capabilities
from padbench.worker.supervisor.slurm import SlurmError, run_command

# Ports node 0 may host a job's rendezvous on: above the well-known and registered services most clusters run,
# below Linux's default ephemeral range (32768 and up), so an outgoing connection never holds it.
RENDEZVOUS_PORT_BASE = 20000
RENDEZVOUS_PORT_SPAN = 12000


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="padbench-rank", description=__doc__.split("\n\n")[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("job_dir", nargs="?", type=Path, help="the job's directory, written by the worker")
    target.add_argument("--capabilities", action="store_true", help="print what this node runs, as JSON")
    return parser


def node_rank() -> int:
    """This node's place in the job (Slurm's SLURM_NODEID; 0 outside Slurm)."""
    return int(os.environ.get("SLURM_NODEID", "0"))


def stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def rendezvous_port(job_id: int) -> int:
    """The port node 0 hosts the rendezvous on: the same on every node without their talking first, and rarely
    the same for two jobs sharing a first node."""
    return RENDEZVOUS_PORT_BASE + job_id % RENDEZVOUS_PORT_SPAN


def slurm_rendezvous(nodes: int, env: Mapping[str, str]) -> Rendezvous:
    """Where this node meets the job's others, from what Slurm tells each task: node 0 is the first host of the
    job's node list (it hosts the store), this node's rank is SLURM_NODEID, and the Slurm job (one per attempt)
    names the run."""
    try:
        hosts = run_command("scontrol", "show", "hostnames", env["SLURM_JOB_NODELIST"]).split()
        job_id = int(env["SLURM_JOB_ID"])
        node_rank = int(env["SLURM_NODEID"])
    except KeyError as missing:
        raise SlurmError(f"{missing.args[0]} is not set: a job across nodes runs under Slurm's srun") from None
    if len(hosts) != nodes:
        raise SlurmError(f"the job asked for {nodes} nodes, and Slurm gave {len(hosts)} ({' '.join(hosts)})")
    return Rendezvous(endpoint=f"{hosts[0]}:{rendezvous_port(job_id)}", run_id=f"padbench-slurm-{job_id}",
                      nodes=nodes, node_rank=node_rank)


def run_node(order: RunOrder, directory: JobDirectory, stop: threading.Event) -> ChildReport:
    try:
        rendezvous = slurm_rendezvous(order.nodes, os.environ) if order.nodes > 1 else None
    except SlurmError as error:
        return ChildReport(outcome="error", error=str(error))
    memory_cap = order.memory_cap_bytes or int(host_memory_bytes() * DEFAULT_JOB_MEMORY_FRACTION)
    # Each node's ranks say which node they are and whose (a result across nodes names them), as a gang's do.
    place = {"PADBENCH_NODE_RANK": str(node_rank()), "PADBENCH_WORKER_NAME": order.worker}
    report = launch_job(order.target, order.spec_text, ranks=order.ranks_per_node, rendezvous=rendezvous,
                        env=place, timeout_s=order.timeout_s,
                        memory_cap_bytes=memory_cap, on_progress=directory.write_progress,
                        on_finished=directory.write_partial, should_stop=stop.is_set, workdir=str(directory.workdir))
    if report.outcome == "cancelled":  # only a signal stops it here: say whose
        return ChildReport(outcome="cancelled", error="stopped by a signal from Slurm (scancel, preemption or its "
                           "time limit)", seconds=report.seconds)
    return report


def print_capabilities() -> int:
    try:
        capabilities = detect_capabilities()
    except CapabilityError as error:
        print(f"padbench-rank: {error}", file=sys.stderr)
        return 1
    print(json.dumps({"capabilities": capabilities.model_dump(mode="json"), "cpu_matmul_flops": cpu_matmul_flops()}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.capabilities:
        return print_capabilities()
    directory = JobDirectory(args.job_dir)
    stop = stop_on_signals()
    try:
        order = directory.order()
    except (FileNotFoundError, TypeError) as error:
        print(f"padbench-rank: {error}", file=sys.stderr)
        return 2
    report = run_node(order, directory, stop)
    directory.write_report(report, node_rank())
    if report.outcome != "ok":
        print(f"padbench-rank: {report.outcome}: {report.error}\n{report.traceback or ''}", file=sys.stderr)
    return 0 if report.outcome == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
