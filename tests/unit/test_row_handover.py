"""Rows handed over as they finish: from a child to its parent (`ChildContext.finished`), and from a padding
job to whoever runs it (`on_partial`), so a job stopped before its end keeps what it measured."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.jobs.padding.job import run_padding_job
from padbench.worker.runtime.isolation import _drain_finished, run_in_child
from tests.unit.test_padding_job import tiny_spec

TARGETS = "tests.unit.supervisor_targets"


def test_pieces_a_child_hands_over_reach_the_parent_in_order_before_its_result() -> None:
    pieces: list[Any] = []
    report = run_in_child(f"{TARGETS}:hand_over_rows", 3, on_finished=pieces.append, timeout_s=60)
    assert (report.outcome, report.value) == ("ok", "done")
    assert pieces == [{"row": 0}, {"row": 1}, {"row": 2}]


def test_pieces_still_unread_when_a_child_is_stopped_are_delivered() -> None:
    receiver, sender = multiprocessing.Pipe(duplex=False)
    sender.send(("finished", 1))
    sender.send(("progress", (0.5, "working")))
    sender.send(("finished", 2))
    sender.send_bytes(b"\x80\x04cut")  # a message the kill cut short ends the drain quietly
    sender.close()
    pieces: list[Any] = []
    _drain_finished(receiver, pieces.append)
    assert pieces == [1, 2]


def test_a_padding_job_hands_over_each_finished_strategy_row_marked_partial() -> None:
    partials: list[PaddingResult] = []
    result = run_padding_job(tiny_spec(strategies=["static", "packed"]), lambda fraction, message: None,
                             partials.append)
    # Each row twice: as soon as its measurement ends (its step split and profile still to come), then whole.
    assert [(p.partial.rows_finished, p.partial.rows_planned, p.partial.last_row_measured_only)
            for p in partials if p.partial] == [(1, 2, True), (1, 2, False), (2, 2, True), (2, 2, False)]
    first = partials[0].strategies
    assert [row.strategy for row in first] == ["static"] and first[0].status == "ok"
    assert first[0].tokens_per_s == result.strategies[0].tokens_per_s  # the same measurement, kept as it was
    assert result.partial is None and len(result.strategies) == 2


def test_a_rank_names_the_gpu_it_runs_on_and_says_cpu_only_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.runtime import launcher

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert launcher.rank_place() == "rank 1 (GPU 5)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert launcher.rank_place() == "rank 1 (cpu)"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(launcher, "_cuda_available", lambda: True)  # every GPU visible, none named
    assert launcher.rank_place() == "rank 1 (GPU 1)"
    monkeypatch.setattr(launcher, "_cuda_available", lambda: False)
    assert launcher.rank_place() == "rank 1 (cpu)"


def test_a_rank_probe_child_sees_only_the_rank_gpu_named_or_by_index(monkeypatch: pytest.MonkeyPatch) -> None:
    from padbench.worker.engine.parallel.ranks import Ranks
    from padbench.worker.jobs.padding.probe.trials import rank_gpu_environment

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert rank_gpu_environment(Ranks(rank=1, world=2, local_rank=1)) == {"CUDA_VISIBLE_DEVICES": "5"}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # a job on every GPU of the host: the rank's is its index
    assert rank_gpu_environment(Ranks(rank=2, world=4, local_rank=2)) == {"CUDA_VISIBLE_DEVICES": "2"}
