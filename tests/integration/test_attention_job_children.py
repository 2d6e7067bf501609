"""The attention sweep through real child processes: the job entry point, OOM under a memory budget,
and a hung child isolated to its cell."""

from __future__ import annotations

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.attention.contract import AttentionJobSpec, AttentionResult
from padbench.kinds.attention.report import render_table
from padbench.worker.jobs import spec_json
from padbench.worker.jobs.attention import cells as cells_module
from padbench.worker.jobs.attention.cells import run_cells
from padbench.worker.runtime.isolation import run_in_child


@pytest.mark.slow
def test_attention_job_end_to_end_with_an_oom_cell() -> None:
    # naive holds two fp32 (1, 2, N, N) matrices: 32 KiB at N=64, 32 MiB at N=2048, over the 12 MiB budget.
    spec = {"kind": "attention", "batch": 1, "heads": 2, "head_dim": 16, "seq_lens": [64, 2048, 4096],
            "dtype": "fp32", "kernels": ["naive", "flash-attn"], "device": "cpu", "warmup": 1, "repeats": 3,
            "cpu_memory_budget_bytes": 12 * 2**20}
    progress: list[float] = []
    report = run_in_child("padbench.worker.jobs:run_job", spec_json(parse_job_spec(spec)), timeout_s=240,
                          on_progress=lambda fraction, message: progress.append(fraction))
    assert report.outcome == "ok", report.traceback
    result = AttentionResult.model_validate(report.value)
    statuses = {(cell.kernel, cell.seq_len): cell.status for cell in result.cells}
    assert statuses == {("naive", 64): "ok", ("naive", 2048): "oom", ("naive", 4096): "oom",
                        ("flash-attn", 64): "unsupported", ("flash-attn", 2048): "unsupported",
                        ("flash-attn", 4096): "unsupported"}
    small = result.cells[0]
    assert small.rel_error is not None and small.rel_error < 1e-5
    assert result.matmul_tflops is not None and small.fraction_of_matmul == pytest.approx(
        small.tflops / result.matmul_tflops)
    assert result.environment.device == "cpu"
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert "naive N=4096: oom: not run: already out of memory at N=2048" in render_table(result)


def test_a_hung_group_is_split_and_each_cell_gets_its_own_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # No time to even import torch: the group child times out, then each length alone does too.
    monkeypatch.setattr(cells_module, "CHILD_STARTUP_S", 0.0)
    spec = AttentionJobSpec(kind="attention", batch=1, heads=2, head_dim=16, seq_lens=[64, 128], dtype="fp32",
                            kernels=["naive"], device="cpu", cell_timeout_s=0.3)
    cells = run_cells(spec, "cpu")
    assert [(cell.seq_len, cell.status) for cell in cells] == [(64, "error"), (128, "error")]
    assert all("limit" in (cell.reason or "") for cell in cells)
