"""What a job's ranks see of their hosts and links: which node (worker, host) each rank runs on, and a short
timed all-reduce over the job's own process group, measured as it starts.

The all-reduce is what the ranks' collectives do every step (FSDP2's reduce-scatter and all-gather move the
same bytes per rank), timed on the slowest rank, and stated as nccl-tests' bus bandwidth so that groups of
different sizes compare. Which transports NCCL chose (NVLink or PCIe, host memory, InfiniBand, sockets) is read
from its own log of the channels it set up (`nccl_log`), beside whether the group spans hosts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist

from padbench.contract.parallel import Interconnect, NodeRun, ParallelRun
from padbench.worker.engine.parallel.nccl_log import LOG_FILE_VARIABLE, merged, transports_seen
from padbench.worker.engine.parallel.ranks import Backend, Ranks

# Bytes each rank contributes: large enough that the time is the links' and not the call's (NCCL reaches its
# bus bandwidth from tens of MiB), small enough to take well under a second (gloo on a CPU moves ~1 GB/s).
ALL_REDUCE_BYTES = {"nccl": 64 * 2**20, "gloo": 4 * 2**20}
TIMED_ALL_REDUCES = 5


def this_node() -> tuple[int, str, str]:
    """This rank's node as the worker that started it named it (its node rank in the gang and its own name),
    and the host it runs on; outside a gang, torch's node (group) rank and no worker name."""
    node_rank = int(os.environ.get("PADBENCH_NODE_RANK", os.environ.get("GROUP_RANK", "0")))
    return node_rank, os.environ.get("PADBENCH_WORKER_NAME", ""), socket.gethostname()


def nodes_of(ranks: Ranks) -> tuple[list[NodeRun], int]:
    """Every node the job's ranks run on, with its ranks (empty for a job on one node), and the number of
    distinct hosts among them. A collective: every rank calls it."""
    places = ranks.gather(this_node())
    hosts = len({host for _, _, host in places})
    by_node: dict[int, NodeRun] = {}
    for rank, (node_rank, worker, host) in enumerate(places):
        known = by_node.get(node_rank)
        ranks_on_node = [*known.ranks, rank] if known is not None else [rank]
        by_node[node_rank] = NodeRun(node_rank=node_rank, worker=worker, host=host, ranks=ranks_on_node)
    nodes = [by_node[rank] for rank in sorted(by_node)]
    return (nodes if len(nodes) > 1 else []), hosts


def measure_interconnect(ranks: Ranks, device: torch.device, backend: Backend, hosts: int) -> Interconnect:
    """Time all-reduces of ALL_REDUCE_BYTES per rank over the job's process group (every rank calls it)."""
    size = ALL_REDUCE_BYTES[backend]
    tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
    dist.all_reduce(tensor)  # the first call sets up the links: not timed
    seconds = []
    for _ in range(TIMED_ALL_REDUCES):
        _synchronize(device)
        start = time.perf_counter()
        dist.all_reduce(tensor)
        _synchronize(device)
        seconds.append(time.perf_counter() - start)
    slowest = max(statistics.median(times) for times in ranks.gather(seconds))
    bus_bytes = size * 2 * (ranks.world - 1) / ranks.world
    seen = merged(ranks.gather(transports_seen())) if backend == "nccl" else None
    _forget_nccl_log()
    return Interconnect(backend=backend, nccl_version=_nccl_version() if backend == "nccl" else None, hosts=hosts,
                        across_hosts=hosts > 1, all_reduce_bytes=size, all_reduce_seconds=slowest,
                        all_reduce_bus_gbps=bus_bytes / slowest / 1e9,
                        nccl_transports=seen.transports if seen else [], nccl_network=seen.network if seen else None)


def _forget_nccl_log() -> None:
    """Remove this rank's NCCL log once read (NCCL keeps writing to the open file; nothing else reads it)."""
    path = os.environ.get(LOG_FILE_VARIABLE)
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _nccl_version() -> str | None:
    version = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else None


def with_links(run: ParallelRun | None, ranks: Ranks, device: torch.device,
               backend: Backend | None) -> ParallelRun | None:
    """`run` (how a job on several ranks spread its work) with the nodes its ranks ran on and its links measured;
    None stays None (one rank). A collective when `run` is set: every rank calls it."""
    if run is None or backend is None:
        return run
    nodes, hosts = nodes_of(ranks)
    return run.model_copy(update={"nodes": nodes, "interconnect": measure_interconnect(ranks, device, backend, hosts)})
