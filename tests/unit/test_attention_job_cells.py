"""The parent side of the cell children, with the child replaced: grouping, isolation after a failure."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from padbench.contract.results import Environment
from padbench.kinds.attention.contract import AttentionCell, AttentionJobSpec, AttentionResult
from padbench.worker.jobs.attention import cells as cells_module
from padbench.worker.jobs.attention import job as attention_job
from padbench.worker.jobs.attention.cells import _one_cell, run_cells
from padbench.worker.jobs.attention.inputs import Problem
from padbench.worker.jobs.attention.job import run_attention_job
from padbench.worker.jobs.attention.kernels import SWEEP_KERNELS
from padbench.worker.jobs.attention.measure import CellSettings
from padbench.worker.runtime.isolation import ChildReport

SPEC = AttentionJobSpec(kind="attention", batch=1, heads=2, head_dim=16, seq_lens=[256, 64, 128], dtype="fp32",
                        kernels=["naive", "flash-attn", "sdpa-math"], device="cpu")


def measured(seq_len: int, kernel: str = "naive") -> dict[str, Any]:
    return AttentionCell(kernel=kernel, seq_len=seq_len, status="ok", median_ms=1.0).model_dump(mode="json")


NAIVE = [("naive", 64), ("naive", 128), ("naive", 256)]
MATH = [("sdpa-math", 64), ("sdpa-math", 128), ("sdpa-math", 256)]


class FakeChildren:
    """Stands in for run_in_child: answers each call from a script and records the lengths asked for."""

    def __init__(self, answers: list[ChildReport], hand_over: bool = False) -> None:
        self.answers = answers
        self.groups: list[list[tuple[str, int]]] = []
        self.hand_over = hand_over  # hand each answered cell over on the way, as the real child does

    def __call__(self, target: str, spec: dict[str, Any], keys: list[tuple[str, int]], device: str,
                 **options: Any) -> ChildReport:
        self.groups.append(list(keys))
        answer = self.answers.pop(0)
        for cell in answer.value if self.hand_over else []:
            options["on_finished"](cell)
        return answer


def run_with(monkeypatch: pytest.MonkeyPatch, answers: list[ChildReport]) -> tuple[list[AttentionCell], FakeChildren]:
    children = FakeChildren(answers)
    monkeypatch.setattr(cells_module, "run_in_child", children)
    return run_cells(SPEC, "cpu"), children


def test_one_child_measures_every_cell_kernel_by_kernel_shortest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    everything = [measured(n, k) for k, n in NAIVE + MATH]
    cells, children = run_with(monkeypatch, [ChildReport("ok", value=everything)])
    assert children.groups == [NAIVE + MATH]  # flash-attn needs no child: it cannot run on a CPU
    flash = [("flash-attn", 64), ("flash-attn", 128), ("flash-attn", 256)]
    assert [(cell.kernel, cell.seq_len) for cell in cells] == [*NAIVE, *flash, *MATH]
    assert {cell.reason for cell in cells if cell.kernel == "flash-attn"} == {"needs a CUDA device"}


def test_cells_a_child_did_not_reach_go_to_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [ChildReport("ok", value=[measured(64)]),
               ChildReport("ok", value=[measured(n, k) for k, n in NAIVE[1:] + MATH])]
    cells, children = run_with(monkeypatch, answers)
    assert children.groups == [NAIVE + MATH, NAIVE[1:] + MATH]
    assert all(cell.status == "ok" for cell in cells if cell.kernel != "flash-attn")


def test_a_dead_group_is_rerun_one_cell_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    crash = ChildReport("crash", error="child killed by signal SIGSEGV")
    answers = [crash, ChildReport("ok", value=[measured(64)]), crash,
               ChildReport("timeout", error="child ran past its 60 s limit"),
               *(ChildReport("ok", value=[measured(n, k)]) for k, n in MATH)]
    cells, children = run_with(monkeypatch, answers)
    assert children.groups == [NAIVE + MATH] + [[key] for key in NAIVE + MATH]
    assert [(cell.seq_len, cell.status) for cell in cells[:3]] == [(64, "ok"), (128, "error"), (256, "error")]
    assert cells[1].reason == "child killed by signal SIGSEGV"
    assert cells[2].reason == "child ran past its 60 s limit"


def test_a_sticky_cuda_error_ends_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def poisoned(*args: object) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(cells_module, "measure_cell", poisoned)
    problem = Problem.from_spec(SPEC, 64)
    cell, sticky = _one_cell(SWEEP_KERNELS.get("naive"), problem, torch.device("cpu"), CellSettings(1, 1, False), None)
    assert (cell.status, sticky) == ("error", True)
    assert cell.reason is not None and "illegal memory access" in cell.reason


def test_each_cell_a_child_hands_over_reaches_the_job_as_a_partial_result(monkeypatch: pytest.MonkeyPatch) -> None:
    everything = [measured(n, k) for k, n in NAIVE + MATH]
    monkeypatch.setattr(cells_module, "run_in_child", FakeChildren([ChildReport("ok", value=everything)],
                                                                   hand_over=True))
    environment = Environment(hostname="unit", device="cpu", python="3", torch="none", started_at="2026-11-23")
    monkeypatch.setattr(attention_job, "_measure_context", lambda spec, device: (environment, 10.0))
    partials: list[AttentionResult] = []
    result = run_attention_job(SPEC, lambda fraction, message: None, partials.append)
    # The flash-attn cells (it cannot run on a CPU) are known from the start; each measured cell adds one.
    assert [p.partial.rows_finished for p in partials if p.partial] == [4, 5, 6, 7, 8, 9]
    assert {p.partial.rows_planned for p in partials if p.partial} == {9}
    flash = [("flash-attn", 64), ("flash-attn", 128), ("flash-attn", 256)]
    assert [(cell.kernel, cell.seq_len) for cell in partials[0].cells] == [("naive", 64), *flash]
    assert partials[-1].cells == result.cells and result.partial is None
