"""Split-KV decode attention: partials merged by log-sum-exp equal one softmax over each slot's range, with
soft-capping, sinks, windows and empty ranges. The kernel runs on CUDA (the `gpu` tier) or, where Triton is
installed, in its interpreter on the CPU (TRITON_INTERPRET=1)."""

from __future__ import annotations

import importlib.util
import math
import os

import pytest
import torch

from padbench.worker.engine.decoding.split_kv import LOG2E, SplitKv, fits, merge, split_kv_attention

SLOTS, CAPACITY, HEADS, KV_HEADS, DIM = 5, 300, 4, 2, 32


def reference(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, first: torch.Tensor, last: torch.Tensor,
              scale: float, softcap: float | None, sinks: torch.Tensor | None) -> torch.Tensor:
    """One softmax per slot over keys first..last, the plain way."""
    out = torch.zeros(q.shape, dtype=torch.float32)
    group = q.shape[1] // keys.shape[2]
    for slot in range(q.shape[0]):
        lo, hi = int(first[slot]), int(last[slot]) + 1
        if hi <= lo:
            continue
        k = keys[slot, lo:hi].float().repeat_interleave(group, dim=1)  # (n, heads, dim)
        v = values[slot, lo:hi].float().repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,nhd->hn", q[slot].float(), k) * scale
        if softcap is not None:
            scores = softcap * torch.tanh(scores / softcap)
        if sinks is not None:
            scores = torch.cat([scores, sinks.float()[:, None]], dim=1)
        weights = torch.softmax(scores, dim=1)[:, :hi - lo]
        out[slot] = torch.einsum("hn,nhd->hd", weights, v)
    return out


def _inputs(dtype: torch.dtype, device: str) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(SLOTS, HEADS, DIM, generator=generator).to(device, dtype)
    keys = torch.randn(SLOTS, CAPACITY, KV_HEADS, DIM, generator=generator).to(device, dtype)
    values = torch.randn(SLOTS, CAPACITY, KV_HEADS, DIM, generator=generator).to(device, dtype)
    # a whole region, a range ending mid-tile, a window's late start, one key, an idle slot
    first = torch.tensor([0, 0, 150, 7, 0], dtype=torch.int32, device=device)
    last = torch.tensor([299, 130, 299, 7, -1], dtype=torch.int32, device=device)
    return q, keys, values, first, last


def test_merging_chunked_partials_is_one_softmax_with_sinks() -> None:
    q, keys, values, first, last = _inputs(torch.float32, "cpu")
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0])
    chunks = [(0, 100), (100, 200), (200, 300)]
    acc, top, total = [], [], []
    for lo, hi in chunks:  # partials as the kernel writes them: unnormalised output, base-2 max and sum
        k = keys[:, lo:hi].repeat_interleave(2, dim=2)
        v = values[:, lo:hi].repeat_interleave(2, dim=2)
        scores = torch.einsum("shd,snhd->shn", q, k) / math.sqrt(DIM) * LOG2E
        keys_at = torch.arange(lo, hi)
        inside = (keys_at >= first[:, None]) & (keys_at <= last[:, None])
        scores = scores.masked_fill(~inside[:, None], float("-inf"))
        peak = scores.amax(dim=2)
        weights = torch.exp2(scores - torch.where(torch.isfinite(peak), peak, 0.0)[..., None])
        acc.append(torch.einsum("shn,snhd->shd", weights, v))
        top.append(peak)
        total.append(weights.sum(dim=2))
    merged = merge(torch.stack(acc), torch.stack(top), torch.stack(total), sinks)
    expected = reference(q, keys, values, first, last, 1 / math.sqrt(DIM), None, sinks)
    assert torch.allclose(merged, expected, atol=1e-5)
    assert torch.equal(merged[-1], torch.zeros_like(merged[-1]))  # the idle slot: zeros, not NaN


def test_takes_grouped_heads_up_to_a_tensor_core_tile() -> None:
    q, keys = torch.empty(1, 16, 128), torch.empty(1, 8, 8, 128)
    assert fits(q, keys)
    assert not fits(torch.empty(1, 64, 128), torch.empty(1, 8, 2, 128))  # 32 query heads per key head
    assert not fits(torch.empty(1, 16, 96), torch.empty(1, 8, 8, 96))


def _kernel_device() -> str | None:
    if importlib.util.find_spec("triton") is None:
        return None
    if torch.cuda.is_available():
        return "cuda"
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else None


@pytest.mark.gpu
@pytest.mark.parametrize("softcap", [None, 30.0])
@pytest.mark.parametrize("with_sinks", [False, True])
@pytest.mark.parametrize("tiling", [SplitKv(128, 64), SplitKv(64, 32), SplitKv(256, 64)], ids=SplitKv.label)
def test_kernel_matches_one_softmax_per_slot(softcap: float | None, with_sinks: bool, tiling: SplitKv) -> None:
    device = _kernel_device()
    if device is None:
        pytest.skip("the kernel needs Triton and CUDA, or Triton's interpreter (TRITON_INTERPRET=1)")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, keys, values, first, last = _inputs(dtype, device)
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device=device) if with_sinks else None
    out = split_kv_attention(q, keys, values, first, last, 1 / math.sqrt(DIM), softcap, sinks, tiling)
    expected = reference(q.cpu(), keys.cpu(), values.cpu(), first.cpu(), last.cpu(), 1 / math.sqrt(DIM), softcap,
                         sinks.cpu() if sinks is not None else None)
    tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-4
    assert out.dtype == dtype and out.shape == q.shape
    assert torch.allclose(out.float().cpu(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.gpu
def test_compiled_as_a_decode_step_compiles_it() -> None:
    if not torch.cuda.is_available() or importlib.util.find_spec("triton") is None:
        pytest.skip("needs CUDA and Triton")
    q, keys, values, first, last = _inputs(torch.bfloat16, "cuda")
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], device="cuda")

    def step(q: torch.Tensor, first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        return split_kv_attention(q, keys, values, first, last, 1 / math.sqrt(DIM), 30.0, sinks, SplitKv())

    out = torch.compile(step, dynamic=False)(q, first, last)
    expected = reference(q.cpu(), keys.cpu(), values.cpu(), first.cpu(), last.cpu(), 1 / math.sqrt(DIM), 30.0,
                         sinks.cpu())
    assert torch.allclose(out.float().cpu(), expected, atol=2e-2, rtol=2e-2)
