"""How a job's processes start: one child, or one child per rank through PyTorch's elastic launcher.

A job on one GPU runs in one spawned child (`run_in_child`). A job on several GPUs runs in the same kind of
child, which starts the ranks with `torch.distributed.launcher.api.elastic_launch` — the launcher behind
`torchrun`, so the ranks see exactly the environment (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, …)
that users' own scripts see. The ranks inherit the child's process group, so the supervisor's deadline,
memory cap and stop reach every rank; the elastic agent ends all ranks when one fails (`max_restarts=0`:
a benchmark that silently restarts measures something else). Rank 0 reports progress and results; any
rank's error is named with its rank and GPU.

A job across several hosts (nodes) passes a `Rendezvous`: every node's launcher meets the others at node 0's
c10d store (`rdzv_backend="c10d"`, `nnodes` = the nodes, `node_rank` fixed by whoever placed the nodes: a gang
of padbench workers, or a cluster's scheduler), so rank numbers run across nodes and only node 0's rank 0
reports. Node 0 hosts the store; the others only connect to it, so two "nodes" on one host (tests, or two
workers sharing a machine) never race to bind the same port.

The job kind runs the same target either way and never learns how many processes run it, except through
`torch.distributed`'s own environment.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import tempfile
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from padbench.worker.runtime.isolation import (
    ChildContext,
    ChildReport,
    classify_exception,
    describe_exception,
    resolve_target,
    run_in_child,
)
from padbench.worker.runtime.procfs import die_with_parent

# How long the launcher waits for the ranks to meet before it gives up (they start on one host: seconds).
RENDEZVOUS_TIMEOUT_S = 300
# How often the elastic agent looks at its ranks: a rank that died is noticed within this.
MONITOR_INTERVAL_S = 0.2


@dataclass(frozen=True)
class Rendezvous:
    """Where this node's launcher meets the other nodes of a job across several: node 0's c10d store at
    `endpoint` (`host:port`), under `run_id` (the same on every node, new for every attempt), `nodes` nodes in
    all, this one being `node_rank` (0 hosts the store). `local_addr` is the address the other nodes reach this
    one at (None: torch's guess from the host name)."""

    endpoint: str
    run_id: str
    nodes: int
    node_rank: int
    local_addr: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.node_rank < self.nodes:
            raise ValueError(f"node_rank {self.node_rank} is not one of the {self.nodes} nodes")


def launch_job(target: str, *args: Any, ranks: int = 1, rendezvous: Rendezvous | None = None,
               **options: Any) -> ChildReport:
    """Run `module:function(ctx, *args)` as one process, or as `ranks` processes started by torch's launcher
    (`ranks` on this node; with a `rendezvous`, nodes × ranks in all); `options` are `run_in_child`'s. Never
    raises for what the processes do."""
    if ranks < 1:
        raise ValueError(f"a job runs on at least one process, not {ranks}")
    if ranks == 1 and rendezvous is None:
        return run_in_child(target, *args, **options)
    return run_in_child(f"{__name__}:run_ranks", target, ranks, args, rendezvous, **options)


class RankContext:
    """The rank's stand-in for `ChildContext`: rank 0's progress and finished pieces go to the parent; the
    other ranks' are dropped (every rank runs the same job, so one voice is enough)."""

    def __init__(self, messages: Any, rank: int) -> None:
        self._messages, self.rank = messages, rank

    def progress(self, fraction: float, message: str = "") -> None:
        if self.rank == 0:
            self._messages.put(("progress", (float(fraction), message)))

    def finished(self, value: Any) -> None:
        if self.rank == 0:
            self._messages.put(("finished", value))


def rank_place() -> str:
    """Where this rank runs, for error messages: its rank and the GPU it was given (or the CPU)."""
    rank, local = os.environ.get("RANK", "?"), int(os.environ.get("LOCAL_RANK", "0"))
    if "CUDA_VISIBLE_DEVICES" not in os.environ and _cuda_available():
        return f"rank {rank} (GPU {local})"  # `padbench run` on a GPU machine: every GPU is visible, in order
    visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
    if not visible:  # a job on the CPU is given no GPU at all
        return f"rank {rank} (cpu)"
    gpu = visible[local] if local < len(visible) else f"local {local}"
    return f"rank {rank} (GPU {gpu})"


def _cuda_available() -> bool:
    import torch  # a rank has it loaded already

    return bool(torch.cuda.is_available())


def rank_main(messages: Any, target: str, args: tuple[Any, ...]) -> Any:
    """Each rank's entry point, in a process the elastic agent spawned: run the job, report an error with the
    rank's place before dying of it, and leave the process group torn down."""
    die_with_parent()  # the launcher child's own death (a kill from the supervisor) ends the rank too
    rank = int(os.environ.get("RANK", "0"))
    try:
        return resolve_target(target)(RankContext(messages, rank), *args)
    except BaseException as error:
        messages.put(("error", (rank, rank_place(), classify_exception(error), describe_exception(error))))
        raise
    finally:
        _leave_process_group()


def _leave_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        with contextlib.suppress(Exception):  # the group may already be broken by another rank's death
            dist.destroy_process_group()


class RankErrors:
    """The first error each rank reported, in the order they arrived (the first is usually the cause: the
    others are ranks that a collective left waiting)."""

    def __init__(self) -> None:
        self.reported: list[tuple[int, str, str, str]] = []

    def add(self, payload: tuple[int, str, str, str]) -> None:
        if all(payload[0] != rank for rank, *_ in self.reported):
            self.reported.append(payload)

    def cause(self) -> tuple[int, str, str, str] | None:
        """The first reported error that is not a broken collective; else the first reported."""
        for payload in self.reported:
            if not _is_collateral(payload[3]):
                return payload
        return self.reported[0] if self.reported else None


# How an error reads on a rank that only lost its peers: the cause is on another rank.
_COLLATERAL_MARKERS = ("Connection closed by peer", "Connection reset by peer", "ProcessGroupNCCL", "timed out",
                       "Broken pipe", "NCCL communicator was aborted", "remote worker crashing")


def _is_collateral(detail: str) -> bool:
    return any(marker in detail for marker in _COLLATERAL_MARKERS)


class RanksFailed(RuntimeError):
    """A rank ended the job: its message names the rank and its GPU, and says what happened there."""


def _forward(messages: Any, ctx: ChildContext, errors: RankErrors, done: threading.Event) -> None:
    while not done.is_set() or not messages.empty():
        try:
            kind, payload = messages.get(timeout=0.1)
        except queue.Empty:
            continue
        except (EOFError, OSError):
            return
        if kind == "progress":
            ctx.progress(*payload)
        elif kind == "finished":
            ctx.finished(payload)
        elif kind == "error":
            errors.add(payload)


def _launch_config(ranks: int, log_dir: str, rendezvous: Rendezvous | None) -> Any:
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig

    logs = DefaultLogsSpecs(log_dir=log_dir)
    common: dict[str, Any] = {"nproc_per_node": ranks, "rdzv_backend": "c10d", "max_restarts": 0,
                              "monitor_interval": MONITOR_INTERVAL_S, "start_method": "spawn", "logs_specs": logs}
    if rendezvous is None:  # one node: a private store on a free loopback port
        return LaunchConfig(min_nodes=1, max_nodes=1, run_id=f"padbench-{uuid.uuid4().hex}",
                            rdzv_endpoint="127.0.0.1:0", rdzv_configs={"timeout": RENDEZVOUS_TIMEOUT_S},
                            local_addr="127.0.0.1", **common)
    # Node 0 hosts the store and the others connect to it: torch would otherwise guess from the host name, and
    # two nodes on one host would both try to bind the port.
    configs = {"timeout": RENDEZVOUS_TIMEOUT_S, "is_host": rendezvous.node_rank == 0,
               "rank": rendezvous.node_rank}
    return LaunchConfig(min_nodes=rendezvous.nodes, max_nodes=rendezvous.nodes, run_id=rendezvous.run_id,
                        rdzv_endpoint=rendezvous.endpoint, rdzv_configs=configs, local_addr=rendezvous.local_addr,
                        **common)


def run_ranks(ctx: ChildContext, target: str, ranks: int, args: tuple[Any, ...],
              rendezvous: Rendezvous | None = None) -> Any:
    """Child-process target: start `ranks` ranks of `target` (this node's, with a `rendezvous`) and return the
    lowest rank's value (rank 0's on node 0); a failed rank raises `RanksFailed` naming it (classified as its
    own error was: out of memory stays out of memory)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    messages = multiprocessing.get_context("spawn").Queue()
    errors, done = RankErrors(), threading.Event()
    forwarder = threading.Thread(target=_forward, args=(messages, ctx, errors, done), daemon=True)
    forwarder.start()
    # The elastic agent's per-rank log files go to a private directory removed when the ranks end, never to
    # the caller's working directory (`padbench run` starts here from wherever the user stands).
    try:
        with tempfile.TemporaryDirectory(prefix="padbench-ranks-") as log_dir:
            returned = elastic_launch(_launch_config(ranks, log_dir, rendezvous), rank_main)(messages, target, args)
    except ChildFailedError as failure:
        done.set()
        forwarder.join(timeout=5)
        raise RanksFailed(_failure_message(failure, errors, ranks)) from None
    done.set()
    forwarder.join(timeout=5)
    return returned.get(0)  # global rank 0's: None on a node without it (its job reports nothing)


def _failure_message(failure: Any, errors: RankErrors, ranks: int) -> str:
    """The cause, in order of evidence: a rank's own error; a rank killed before it could say anything (a
    signal, the kernel's OOM killer); an error that only says a peer went away."""
    reported = errors.cause()
    if reported is not None and not _is_collateral(reported[3]):
        return _reported_message(reported)
    said = {rank for rank, *_ in errors.reported}
    for rank, process in sorted(failure.failures.items()):
        if rank not in said:
            return f"{_place_of(rank, ranks)} {_describe_death(process.exitcode)}"
    if reported is not None:
        return _reported_message(reported)
    rank, first = failure.get_first_failure()
    return f"{_place_of(rank, ranks)} {_describe_death(first.exitcode)}"


def _reported_message(reported: tuple[int, str, str, str]) -> str:
    _, place, outcome, detail = reported
    return f"{place} {'ran out of memory' if outcome == 'oom' else 'failed'}: {detail}"


def _place_of(rank: int, ranks: int) -> str:
    """A global rank as this node knows it: its GPU is the node's (rank mod the node's ranks)-th visible one."""
    visible = [gpu for gpu in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if gpu.strip()]
    if not visible:
        return f"rank {rank} (cpu)"
    local = rank % ranks
    return f"rank {rank} (GPU {visible[local]})" if local < len(visible) else f"rank {rank}"


def _describe_death(exitcode: int) -> str:
    import signal

    if exitcode < 0:
        return f"died: killed by signal {signal.Signals(-exitcode).name}"
    return f"died: exited with code {exitcode} without saying why"

