"""Jobs on several processes: torch's elastic launcher inside the worker's child isolation.

Real processes on gloo: rank 0's value comes back, only its progress is forwarded; a rank that raises,
runs out of memory or is killed ends the whole job with a message naming it, and leaves no process behind.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from padbench.worker.runtime.launcher import launch_job

TARGETS = "tests.integration.rank_targets"
pytestmark = pytest.mark.slow  # each test starts three Python processes that import torch


def rank_pids(pid_dir: Path) -> list[int]:
    return [int(path.read_text()) for path in sorted(pid_dir.glob("rank*.pid"))]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)]


def launch(target: str, pid_dir: Path, *args: object, **options: object):  # type: ignore[no-untyped-def]
    return launch_job(f"{TARGETS}:{target}", str(pid_dir), *args, ranks=2, timeout_s=120,
                      workdir=str(pid_dir), env={"CUDA_VISIBLE_DEVICES": ""}, **options)


def test_two_ranks_return_rank_zeros_value_and_forward_only_its_progress(tmp_path: Path) -> None:
    progress: list[str] = []
    pieces: list[object] = []
    report = launch("sum_ranks", tmp_path, on_progress=lambda _f, message: progress.append(message),
                    on_finished=pieces.append)
    assert report.outcome == "ok", report.error
    assert report.value == {"rank": 0, "world": 2, "sum": 3.0}
    assert progress == ["rank 0 halfway"] and pieces == [{"rank": 0}]
    assert_all_gone(rank_pids(tmp_path))
    # The elastic agent's log files went to a directory of their own, gone with the ranks.
    assert not (tmp_path / "ranks").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["rank0.pid", "rank1.pid"]


@pytest.mark.parametrize(("error", "outcome", "words"), [
    ("value", "error", "rank 1 (cpu) failed: ValueError: bad shape on rank 1"),
    ("oom", "oom", "rank 1 (cpu) ran out of memory: MemoryError: CUDA out of memory (simulated)"),
])
def test_a_failing_rank_ends_the_job_naming_itself(tmp_path: Path, error: str, outcome: str, words: str) -> None:
    report = launch("fail_on_rank_one", tmp_path, error)
    assert report.outcome == outcome
    assert report.error is not None and words in report.error
    assert report.seconds < 60  # the rank left waiting in its collective was ended, not waited for
    assert_all_gone(rank_pids(tmp_path))


def test_a_killed_rank_ends_the_job_naming_itself(tmp_path: Path) -> None:
    report = launch("die_on_rank_one", tmp_path)
    assert report.outcome == "error"
    assert report.error is not None and "rank 1 (cpu) died: killed by signal SIGKILL" in report.error
    assert_all_gone(rank_pids(tmp_path))


def test_a_hung_job_past_its_deadline_leaves_no_rank_behind(tmp_path: Path) -> None:
    # The deadline leaves the ranks time to import torch and write their pids on a busy two-core machine (15 s
    # did not, once); the job hangs until the deadline either way.
    report = launch_job(f"{TARGETS}:hang", str(tmp_path), ranks=2, timeout_s=45, workdir=str(tmp_path),
                        env={"CUDA_VISIBLE_DEVICES": ""})
    assert report.outcome == "timeout"
    pids = rank_pids(tmp_path)
    assert len(pids) == 2
    assert_all_gone(pids)


def test_one_rank_is_one_plain_child(tmp_path: Path) -> None:
    report = launch_job("tests.unit.supervisor_targets:write_in_cwd", {}, ranks=1, workdir=str(tmp_path))
    assert report.outcome == "ok"


def test_two_nodes_on_one_host_meet_at_node_zeros_store_and_only_one_reports_rank_zero(tmp_path: Path) -> None:
    """Two launchers given the same rendezvous act as two nodes: node 0 hosts the c10d store, node 1 (started
    first, so it finds no store yet) only connects to it; the four ranks form one group and only the node that
    got global rank 0 returns a value."""
    import socket
    import threading

    from padbench.worker.runtime.launcher import Rendezvous

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reports: dict[int, object] = {}

    def node(rank: int) -> None:
        rendezvous = Rendezvous(endpoint=f"127.0.0.1:{port}", run_id=f"test-{port}", nodes=2, node_rank=rank,
                                local_addr="127.0.0.1")
        reports[rank] = launch("sum_ranks", tmp_path, rendezvous=rendezvous)

    threads = [threading.Thread(target=node, args=(rank,)) for rank in (1, 0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(report.outcome == "ok" for report in reports.values()), reports  # type: ignore[attr-defined]
    values = [report.value for report in reports.values() if report.value is not None]  # type: ignore[attr-defined]
    assert values == [{"rank": 0, "world": 4, "sum": 10.0}]
    assert_all_gone(rank_pids(tmp_path))
