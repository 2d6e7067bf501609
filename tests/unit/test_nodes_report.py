"""How a job across several nodes is reported: a line per node (its worker, host and ranks) and the all-reduce
its ranks timed, under the table's header; and how a rank finds its node."""

from __future__ import annotations

import pytest

from padbench.contract.parallel import Interconnect, NodeRun, ParallelRun
from padbench.kinds.padding.ranks import parallel_lines
from padbench.worker.engine.parallel.interconnect import nodes_of, this_node
from padbench.worker.engine.parallel.ranks import ONE_RANK

LINKS = Interconnect(backend="nccl", nccl_version="2.27.3", hosts=2, across_hosts=True, all_reduce_bytes=64 * 2**20,
                     all_reduce_seconds=0.0021, all_reduce_bus_gbps=47.9)


def test_each_node_and_the_links_are_named_under_the_header() -> None:
    run = ParallelRun(gpus=16, parallelism="sharded", precision="amp", backend="nccl", interconnect=LINKS,
                      nodes=[NodeRun(node_rank=0, worker="gpu-box-1", host="h1", ranks=list(range(8))),
                             NodeRun(node_rank=1, worker="gpu-box-2", host="h2", ranks=list(range(8, 16)))])

    class Result:  # parallel_lines reads only the result's `parallel`
        parallel = run

    lines = parallel_lines(Result())  # type: ignore[arg-type]
    assert lines[0].startswith("on 16 GPUs: sharded (FSDP2), weights in amp, nccl")
    assert lines[1] == "  node 0: worker gpu-box-1 on h1, ranks 0, 1, 2, 3, 4, 5, 6, 7"
    assert lines[2].startswith("  node 1: worker gpu-box-2 on h2, ranks 8, 9")
    assert lines[3] == ("  links: NCCL 2.27.3 across 2 hosts, all-reduce of 64 MiB per rank in 2.1 ms: 47.90 GB/s bus "
                        "bandwidth")


def test_a_rank_takes_its_node_from_the_worker_that_started_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUP_RANK", "3")
    monkeypatch.delenv("PADBENCH_NODE_RANK", raising=False)
    monkeypatch.delenv("PADBENCH_WORKER_NAME", raising=False)
    assert this_node()[:2] == (3, "")  # torch's node rank where no padbench worker said otherwise
    monkeypatch.setenv("PADBENCH_NODE_RANK", "1")
    monkeypatch.setenv("PADBENCH_WORKER_NAME", "node-b")
    assert this_node()[:2] == (1, "node-b")
    assert nodes_of(ONE_RANK) == ([], 1)  # one process: no node list
