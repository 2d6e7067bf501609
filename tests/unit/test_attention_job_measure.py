"""Cell measurement on the CPU: figures from counted FLOPs, error against float64, failures as cells."""

from __future__ import annotations

import pytest
import torch

from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.worker.engine.measure.matmul_rate import measure_matmul_tflops
from padbench.worker.jobs.attention import cells as cells_module
from padbench.worker.jobs.attention.cells import _one_cell, failed_cell
from padbench.worker.jobs.attention.inputs import Problem, make_input_sets
from padbench.worker.jobs.attention.kernels import SWEEP_KERNELS
from padbench.worker.jobs.attention.measure import CellSettings, measure_cell, reference_attention

CPU = torch.device("cpu")
QUICK = CellSettings(warmup=1, repeats=3, check_error=True)


def problem(seq_len: int = 64, **fields: object) -> Problem:
    base: dict[str, object] = {"kind": "attention", "batch": 2, "heads": 2, "head_dim": 16, "seq_lens": [seq_len],
                               "dtype": "fp32"}
    return Problem.from_spec(AttentionJobSpec.model_validate({**base, **fields}), seq_len)


@pytest.mark.parametrize("direction", ["forward", "forward+backward"])
def test_cell_figures_follow_from_the_timing(direction: str) -> None:
    case = problem(direction=direction, causal=True)
    cell = measure_cell(SWEEP_KERNELS.get("naive"), case, CPU, QUICK)
    assert cell.status == "ok" and cell.kernel == "naive" and cell.seq_len == 64
    assert cell.p10_ms <= cell.median_ms <= cell.p90_ms
    assert cell.tflops == pytest.approx(case.flops / (cell.median_ms * 1e-3) / 1e12)
    assert cell.warmup_ms is not None and cell.warmup_ms > 0
    assert cell.rel_error is not None and cell.rel_error < 1e-5
    assert cell.fraction_of_matmul is None  # filled in by the runner, which knows the matmul rate


def test_error_check_can_be_switched_off() -> None:
    cell = measure_cell(SWEEP_KERNELS.get("sdpa-math"), problem(), CPU, CellSettings(0, 2, check_error=False))
    assert cell.rel_error is None


def test_reference_matches_torch_math_attention_in_float64() -> None:
    case = problem(seq_len=48, causal=True, layout="varlen", varlen={"distribution": "uniform:4:20"})
    inputs = make_input_sets(case, CPU, count=1)[0]
    mask = inputs.documents.allowed(causal=True)[:1]
    q, k, v = (t[:1].double().transpose(1, 2) for t in (inputs.query, inputs.key, inputs.value))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
    assert torch.allclose(reference_attention(inputs, case, rows=1, heads=2, kv_heads=2), expected)


@pytest.mark.parametrize(("outcome", "reason", "status"), [
    ("oom", "OutOfMemoryError: CUDA out of memory", "oom"),
    ("error", "RuntimeError: No available kernel. Aborting execution.", "unsupported"),
    ("error", "NotImplementedError: FlexAttention does not support backward on CPU", "unsupported"),
    ("error", "ValueError: something else", "error"),
])
def test_failures_are_classified(outcome: str, reason: str, status: str) -> None:
    cell = failed_cell("naive", 512, outcome, reason)
    assert (cell.status, cell.reason, cell.median_ms) == (status, reason, None)


def test_an_out_of_memory_cell_is_recorded_and_later_lengths_are_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(*args: object) -> None:
        raise MemoryError("cannot allocate")

    monkeypatch.setattr(cells_module, "measure_cell", exhausted)
    kernel = SWEEP_KERNELS.get("naive")
    cell, sticky = _one_cell(kernel, problem(), CPU, QUICK, out_of_memory_at=None)
    assert (cell.status, sticky) == ("oom", False)
    skipped, _ = _one_cell(kernel, problem(128), CPU, QUICK, out_of_memory_at=64)
    assert skipped.status == "oom" and skipped.reason is not None and "N=64" in skipped.reason


def test_a_kernel_that_cannot_run_here_is_unsupported_not_an_error() -> None:
    cell, _ = _one_cell(SWEEP_KERNELS.get("flash-attn"), problem(), CPU, QUICK, out_of_memory_at=None)
    assert (cell.status, cell.reason) == ("unsupported", "needs a CUDA device")


def test_matmul_rate_is_measured() -> None:
    assert measure_matmul_tflops(CPU, torch.float32, size=128) > 0
