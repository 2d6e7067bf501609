"""Soft-capping and sinks on the CUDA paths the CPU tests cannot reach: compiled FlexAttention (its score_mod
and the log-sum-exp it returns, forward and backward) and flash-attn / flash-attn-4 where they are installed,
each against the materialised eager op in fp32 on the same GPU.

    .venv/bin/python -m pytest -m gpu tests/unit/test_softcap_sinks_gpu.py
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from padbench.worker.engine.attention import flex, masks, ops

pytestmark = pytest.mark.gpu

LENGTHS = (300, 17, 700, 129)
HEADS, KV_HEADS, HEAD_DIM = 8, 4, 64
SOFTCAP, WINDOW = 5.0, 128
BF16_TOLERANCE = 3e-2


def cuda() -> torch.device:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch.device("cuda")


def packed_qkv(device: torch.device) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator(device=device).manual_seed(0)
    total = sum(LENGTHS)

    def draw(heads: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(1, total, heads, HEAD_DIM, device=device, generator=generator) * scale

    return draw(HEADS, 3.0), draw(KV_HEADS), draw(KV_HEADS)


def documents(device: torch.device) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(LENGTHS), dtype=torch.int32, device=device),
                                   torch.tensor(LENGTHS, device=device))


def sinks_on(device: torch.device) -> torch.Tensor:
    return torch.linspace(-2.0, 4.0, HEADS, device=device)


def eager_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, sinks: torch.Tensor | None,
                    window: int | None) -> torch.Tensor:
    mask = masks.block_diagonal_causal(documents(query.device), window)[None, None]
    return ops.naive_dense(query.float(), key.float(), value.float(), causal=False, mask=mask, softcap=SOFTCAP,
                           sinks=sinks)


def assert_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    error = float((got.float() - expected.float()).abs().max())
    assert error <= BF16_TOLERANCE * max(1.0, float(expected.abs().max())), error


@pytest.mark.parametrize("window", [None, WINDOW], ids=["full", "window"])
@pytest.mark.parametrize("with_sinks", [False, True], ids=["softcap", "softcap+sinks"])
def test_compiled_flex_caps_and_sinks_like_eager(window: int | None, with_sinks: bool) -> None:
    device = cuda()
    query, key, value = (t.bfloat16() for t in packed_qkv(device))
    sinks = sinks_on(device) if with_sinks else None
    block_mask = masks.document_causal_block_mask(documents(device), window)
    got = flex.flex_dense(query, key, value, block_mask, softcap=SOFTCAP, sinks=sinks)
    assert_close(got, eager_reference(query, key, value, sinks, window))


def gradients(attend: Callable[..., torch.Tensor], tensors: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    leaves = [tensor.detach().clone().requires_grad_() for tensor in tensors]
    attend(*leaves).float().square().sum().backward()
    return [leaf.grad for leaf in leaves]  # type: ignore[misc]


def test_compiled_flex_trains_through_the_cap_and_the_sinks() -> None:
    """The sinks' correction differentiates through flex's log-sum-exp: every gradient, the sinks' included."""
    device = cuda()
    tensors = (*packed_qkv(device), sinks_on(device))
    block_mask = masks.document_causal_block_mask(documents(device), WINDOW)
    got = gradients(lambda q, k, v, s: flex.flex_dense(q.bfloat16(), k.bfloat16(), v.bfloat16(), block_mask,
                                                       softcap=SOFTCAP, sinks=s), tensors)
    expected = gradients(lambda q, k, v, s: eager_reference(q, k, v, s, WINDOW), tensors)
    for a, b in zip(got, expected, strict=True):
        assert_close(a, b)


def varlen_inputs(device: torch.device) -> tuple[torch.Tensor, int]:
    bounds = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32, device=device)
    return bounds, max(LENGTHS)


@pytest.mark.parametrize("family, call", [("flash-attn", ops.flash_attn_varlen),
                                          ("flash-attn-cute", ops.flash_attn_cute_varlen)])
def test_flash_varlen_caps_and_sinks_where_the_library_takes_them(family: str,
                                                                  call: Callable[..., torch.Tensor]) -> None:
    device = cuda()
    try:
        ops.FLASH_MODULES[family]()
    except ops.KernelUnavailable as error:
        pytest.skip(error.reason)
    function = "flash_attn_varlen_func"
    if ops.flash_library_reason(family, function, "softcap") is not None:
        pytest.skip(str(ops.flash_library_reason(family, function, "softcap")))
    takes_sinks = ops.flash_library_reason(family, function, "learnable_sink") is None
    sinks = sinks_on(device) if takes_sinks else None
    query, key, value = (t.bfloat16() for t in packed_qkv(device))
    bounds, longest = varlen_inputs(device)
    with torch.inference_mode():
        got = call(query[0], key[0], value[0], bounds, bounds, longest, longest, causal=True,
                   scale=HEAD_DIM ** -0.5, window=WINDOW, softcap=SOFTCAP, sinks=sinks)
    assert_close(got[None], eager_reference(query, key, value, sinks, WINDOW))
