"""Workers on one machine acting as the nodes of a job across two (`nodes: 2`, `gpus: 2` as CPU ranks on gloo):
the gang forms from two of three idle workers and the third never takes part of it; a member SIGKILLed
mid-job fails the attempt on every member, the job is requeued and a new gang (the third worker taking the
dead one's place) trains it through the correctness gate, and its result, naming both nodes and all four
ranks, is stored once."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable

import pytest

from padbench.contract.api import JobStatus
from padbench.kinds.padding.contract import PaddingResult
from padbench.kinds.padding.report import render_table
from tests.acceptance.conftest import LiveServer, Worker, children_of
from tests.acceptance.specs import QUICK

pytestmark = pytest.mark.slow

# Training, sharded over 2 nodes × 2 CPU ranks; a measurement of a few seconds, so a member can be killed mid-run.
ACROSS_TWO = QUICK | {"name": "acceptance-gang", "mode": "training", "nodes": 2, "gpus": 2, "strategies": ["static"],
                      "measurement": QUICK["measurement"] | {"min_seconds": 3, "max_batches": None}}


@pytest.fixture
def server_env() -> dict[str, str]:
    # Workers (which inherit this environment) host a rendezvous on loopback; leases short enough that a dead
    # member is noticed in seconds.
    return {"PADBENCH_LEASE_SECONDS": "5", "PADBENCH_LEASE_GRACE_SECONDS": "2", "PADBENCH_REAPER_INTERVAL_SECONDS": "1",
            "PADBENCH_NODE_ADDRESS": "127.0.0.1"}


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        children = children_of(frontier.pop())
        found += children
        frontier += children
    return found


def wait_until(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def joined(worker: Worker) -> bool:
    return "joined its gang" in worker.log_text()


def test_a_gang_forms_loses_a_member_and_succeeds_on_a_new_gang(live_server: LiveServer, start_worker) -> None:
    workers = [start_worker(name) for name in ("node-a", "node-b", "node-c")]
    with live_server.client() as client:
        job_id = client.submit(ACROSS_TWO).id
        wait_until(lambda: sum(joined(worker) for worker in workers) == 2, 120)
        members = [worker for worker in workers if joined(worker)]
        (idle,) = [worker for worker in workers if worker not in members]
        # Each member's launcher child has started its two ranks once the rendezvous completed.
        wait_until(lambda: all(len(descendants(member.process.pid)) >= 4 for member in members), 120)
        job = client.job(job_id)
        assert job.status is JobStatus.running and job.attempts == 1
        assert not joined(idle)  # a full gang takes no one more
        victim = next(member for member in members if member.name != job.worker)  # not the lease's holder
        time.sleep(2)  # the ranks are building the model or training
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(timeout=10)
        (survivor,) = [member for member in members if member is not victim]
        wait_until(lambda: client.job(job_id).attempts == 2, 120)  # the dead member's attempt was requeued
        done = client.wait(job_id, poll_s=0.5, timeout_s=300)
        result = client.results(job_id)
    assert done.status is JobStatus.succeeded, done.error
    assert done.attempts == 2 and joined(idle)
    # The survivor's first attempt stopped: its ranks failed with the dead member's, or its next beat was
    # answered 409 (the attempt lost) and it stopped them.
    assert re.search(r"ranks finished: (error|cancelled)", survivor.log_text())
    assert isinstance(result, PaddingResult)
    assert result.parallel is not None and result.parallel.gpus == 4 and result.parallel.backend == "gloo"
    assert sorted(node.worker for node in result.parallel.nodes) == sorted([survivor.name, idle.name])
    assert sorted(rank for node in result.parallel.nodes for rank in node.ranks) == [0, 1, 2, 3]
    assert result.parallel.interconnect is not None and result.parallel.interconnect.backend == "gloo"
    assert result.parallel.interconnect.all_reduce_bus_gbps > 0
    text = render_table(result)
    assert "on 4 processes: sharded" in text and "  node 1: worker node-" in text
    assert "  links: gloo on one host" in text
    (row,) = result.strategies
    assert row.status == "ok", row.error
    assert row.per_rank is not None and [rank.rank for rank in row.per_rank.ranks] == [0, 1, 2, 3]

