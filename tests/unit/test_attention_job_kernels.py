"""Sweep kernels on the CPU: detection, and every kernel that runs here checked against float64."""

from __future__ import annotations

import pytest
import torch

from padbench.contract.kernel_families import sweep_kernel_names
from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.worker.jobs.attention.cells import predicted_oom
from padbench.worker.jobs.attention.inputs import Problem, make_input_sets
from padbench.worker.jobs.attention.kernels import SWEEP_KERNELS, available_sweep_kernels
from padbench.worker.jobs.attention.measure import relative_error

CPU = torch.device("cpu")


def problem(**fields: object) -> Problem:
    base: dict[str, object] = {"kind": "attention", "batch": 2, "heads": 4, "head_dim": 16, "seq_lens": [96],
                               "dtype": "fp32", "varlen": {"distribution": "uniform:5:40"}}
    return Problem.from_spec(AttentionJobSpec.model_validate({**base, **fields}), 96)


def error_of(kernel: str, case: Problem) -> float:
    inputs = make_input_sets(case, CPU, count=1)[0]
    return relative_error(SWEEP_KERNELS.get(kernel).bind(case, inputs), inputs, case)


def test_every_spec_kernel_name_is_registered() -> None:
    assert list(SWEEP_KERNELS) == sweep_kernel_names()


def test_cpu_capabilities_are_detected_not_assumed() -> None:
    available = available_sweep_kernels("cpu")
    assert {"naive", "sdpa-math"} <= set(available)
    assert "flash-attn" not in available and "flash-attn-cute" not in available
    assert SWEEP_KERNELS.get("flash-attn").available(CPU, torch.bfloat16) == "needs a CUDA device"


@pytest.mark.parametrize("kernel", ["naive", "sdpa-math", "sdpa-flash"])
@pytest.mark.parametrize("case", [
    {}, {"causal": True}, {"kv_heads": 2}, {"layout": "varlen"}, {"layout": "varlen", "causal": True},
], ids=["dense", "causal", "gqa", "varlen", "varlen-causal"])
def test_cpu_kernels_match_float64(kernel: str, case: dict[str, object]) -> None:
    subject = problem(**case)
    if SWEEP_KERNELS.get(kernel).available(CPU, subject.dtype) is not None:
        pytest.skip(f"{kernel} does not run on this CPU build")
    if SWEEP_KERNELS.get(kernel).unsupported(subject) is not None:
        pytest.skip(f"{kernel} cannot express {subject.layout}")
    assert error_of(kernel, subject) < 1e-5


def test_bf16_error_is_small_but_not_zero() -> None:
    error = error_of("naive", problem(dtype="bf16", causal=True))
    assert 1e-4 < error < 3e-2


def test_flash_backend_of_sdpa_refuses_documents() -> None:
    reason = SWEEP_KERNELS.get("sdpa-flash").unsupported(problem(layout="varlen"))
    assert reason is not None and "varlen" in reason
    assert SWEEP_KERNELS.get("varlen").unsupported(problem(layout="varlen")) is None


def test_materialising_kernels_predict_their_score_matrices() -> None:
    case = problem(dtype="bf16")
    one_matrix = 2 * 4 * 96 * 96 * 2
    assert SWEEP_KERNELS.get("naive").predicted_bytes(case) == 2 * one_matrix
    assert SWEEP_KERNELS.get("naive").predicted_bytes(problem(dtype="bf16", direction="forward+backward")) \
        == 4 * one_matrix
    assert SWEEP_KERNELS.get("sdpa-flash").predicted_bytes(case) == 0


@pytest.mark.slow
def test_compiled_flex_matches_float64_on_documents() -> None:
    if SWEEP_KERNELS.get("flex").available(CPU, torch.float32) is not None:
        pytest.skip("flex cannot compile on this machine")
    assert error_of("flex", problem(layout="varlen", causal=True)) < 1e-5


def test_naive_at_16k_on_an_h200_is_predicted_out_of_memory_without_trying() -> None:
    spec = AttentionJobSpec(kind="attention", batch=8, heads=32, head_dim=64, seq_lens=[16384])
    h200 = 141 * 10**9
    naive, flash = SWEEP_KERNELS.get("naive"), SWEEP_KERNELS.get("sdpa-flash")
    reason = predicted_oom(naive, Problem.from_spec(spec, 16384), h200)
    assert reason is not None and "256.0 of 131.3 GiB" in reason  # two bf16 (8, 32, 16384, 16384) matrices
    assert predicted_oom(naive, Problem.from_spec(spec, 8192), h200) is None  # 64 GiB: worth a try
    assert predicted_oom(flash, Problem.from_spec(spec, 16384), h200) is None
