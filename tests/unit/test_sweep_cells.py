"""The parent side of the cell children, with the child replaced: grouping, isolation after a failure."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from padbench.contract.results import AttentionCell
from padbench.contract.spec import AttentionJobSpec
from worker.child import ChildReport
from worker.sweep import cells as cells_module
from worker.sweep.cells import _one_cell, run_kernel
from worker.sweep.inputs import Problem
from worker.sweep.kernels import SWEEP_KERNELS
from worker.sweep.measure import Settings

SPEC = AttentionJobSpec(kind="attention", batch=1, heads=2, head_dim=16, seq_lens=[256, 64, 128], dtype="fp32",
                        kernels=["naive"], device="cpu")


def measured(seq_len: int) -> dict[str, Any]:
    return AttentionCell(kernel="naive", seq_len=seq_len, status="ok", median_ms=1.0).model_dump(mode="json")


class FakeChildren:
    """Stands in for run_in_child: answers each call from a script and records the lengths asked for."""

    def __init__(self, answers: list[ChildReport]) -> None:
        self.answers = answers
        self.groups: list[list[int]] = []

    def __call__(self, target: str, spec: dict[str, Any], kernel: str, seq_lens: list[int], device: str,
                 **options: Any) -> ChildReport:
        self.groups.append(list(seq_lens))
        return self.answers.pop(0)


def run_with(monkeypatch: pytest.MonkeyPatch, answers: list[ChildReport]) -> tuple[list[AttentionCell], FakeChildren]:
    children = FakeChildren(answers)
    monkeypatch.setattr(cells_module, "run_in_child", children)
    return run_kernel(SPEC, "naive", "cpu"), children


def test_one_child_measures_every_length_shortest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    cells, children = run_with(monkeypatch, [ChildReport("ok", value=[measured(n) for n in (64, 128, 256)])])
    assert children.groups == [[64, 128, 256]]
    assert [cell.seq_len for cell in cells] == [64, 128, 256]


def test_lengths_a_child_did_not_reach_go_to_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [ChildReport("ok", value=[measured(64)]), ChildReport("ok", value=[measured(128), measured(256)])]
    cells, children = run_with(monkeypatch, answers)
    assert children.groups == [[64, 128, 256], [128, 256]]
    assert [cell.status for cell in cells] == ["ok", "ok", "ok"]


def test_a_dead_group_is_rerun_one_length_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [ChildReport("crash", error="child killed by signal SIGSEGV"),
               ChildReport("ok", value=[measured(64)]),
               ChildReport("crash", error="child killed by signal SIGSEGV"),
               ChildReport("timeout", error="child ran past its 60 s limit")]
    cells, children = run_with(monkeypatch, answers)
    assert children.groups == [[64, 128, 256], [64], [128], [256]]
    assert [(cell.seq_len, cell.status) for cell in cells] == [(64, "ok"), (128, "error"), (256, "error")]
    assert cells[1].reason == "child killed by signal SIGSEGV"


def test_a_missing_package_needs_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    children = FakeChildren([])
    monkeypatch.setattr(cells_module, "run_in_child", children)
    cells = run_kernel(SPEC, "flash-attn", "cpu")
    assert children.groups == []
    assert {(cell.status, cell.reason) for cell in cells} == {("unsupported", "needs a CUDA device")}


def test_a_sticky_cuda_error_ends_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def poisoned(*args: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(cells_module, "measure_cell", poisoned)
    problem = Problem.from_spec(SPEC, 64)
    cell, sticky = _one_cell(SWEEP_KERNELS.get("naive"), problem, torch.device("cpu"), Settings(1, 1, False), None)
    assert (cell.status, sticky) == ("error", True)
    assert cell.reason is not None and "illegal memory access" in cell.reason
