"""The sweep's FP8 row on the CPU: its refusals, its quantisation, and its call through a stand-in for
FlashAttention-3 that dequantises exactly as the kernel's descale factors say (so the plumbing is checked where
the kernel itself cannot run)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from padbench.kernels.flash_attn_3 import DENSE_ONLY, FORWARD_ONLY
from padbench.worker.engine.attention import ops
from padbench.worker.jobs.attention import fp8
from padbench.worker.jobs.attention.kernels import SWEEP_KERNELS
from tests.unit.test_attention_job_kernels import CPU, error_of, problem


def test_the_row_says_why_it_cannot_run_here_and_which_problems_it_never_runs() -> None:
    kernel = SWEEP_KERNELS.get("flash-attn-fp8")
    assert kernel.available(CPU, torch.bfloat16) == "needs a CUDA device"
    assert kernel.unsupported(problem(direction="forward+backward")) == FORWARD_ONLY
    assert kernel.unsupported(problem(layout="varlen")) == DENSE_ONLY
    assert kernel.unsupported(problem()) is None


def test_quantised_values_use_e4m3s_range_and_descale_back_per_key_value_head() -> None:
    torch.manual_seed(0)
    tensor = torch.randn(2, 40, 4, 16) * torch.tensor([1.0, 10.0, 0.1, 3.0])[None, None, :, None]
    scaled, descale = fp8.quantised(tensor, groups=2)
    assert scaled.dtype == fp8.FP8 and descale.shape == (2, 2)
    assert scaled.float().abs().amax() == torch.finfo(fp8.FP8).max  # the largest value lands on the range's end
    back = scaled.float() * descale.repeat_interleave(2, dim=1)[:, None, :, None]
    assert ((back - tensor).norm() / tensor.norm()) < 0.05


def fake_fa3(q, k, v, causal, q_descale, k_descale, v_descale):  # type: ignore[no-untyped-def]
    def back(tensor: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
        heads_per_factor = tensor.shape[2] // descale.shape[1]
        return tensor.float() * descale.repeat_interleave(heads_per_factor, dim=1)[:, None, :, None]

    q, k, v = back(q, q_descale), back(k, k_descale), back(v, v_descale)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, enable_gqa=True)
    return out.transpose(1, 2).to(torch.bfloat16), None


def test_the_bound_call_computes_attention_within_float8s_error(monkeypatch: pytest.MonkeyPatch,
                                                                request: pytest.FixtureRequest) -> None:
    module = types.ModuleType("flash_attn_interface")
    module.flash_attn_func = fake_fa3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flash_attn_interface", module)
    # Optional imports are looked up once per process: an earlier probe of flash-attn-3 may have found none, and
    # the fake must not outlive this test.
    ops.optional_module.cache_clear()
    request.addfinalizer(ops.optional_module.cache_clear)
    error = error_of("flash-attn-fp8", problem(dtype="bf16", causal=True, kv_heads=2))
    assert 1e-3 < error < 0.1  # e4m3 keeps 3 mantissa bits: a few percent, never exact
