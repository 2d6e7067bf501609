"""Gemma 2's logit soft-capping on the fast kernels: FlexAttention (a score_mod beside the block masks) and
flash-attn / flash-attn-4 (their `softcap` argument, where the installed version takes it).

A tiny Gemma 2 whose attention logits exceed the cap, with a window shorter than the sequences, runs every
layout through the correctness gate on flex and eager; a flex kernel made to drop the cap must fail it.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS, KernelUnavailable, flex, libraries, ops
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES
from padbench.worker.engine.measure.correctness import reference_logits
from tests.unit.test_sliding_windows import LAYOUTS, WINDOW, gate, sample, windowed

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def gemma2() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model = windowed("tiny-gemma2", layer_types=["sliding_attention", "full_attention"])
    with torch.no_grad():  # larger queries push the logits past the cap of 50, so capping changes the function
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(40)
    return model, reference_logits(model, sample(), CPU, eager=True)


def kernels_of(family: str, layout: StrategySpec) -> Any:
    return next(kernel for _, kernel in ATTENTION_KERNELS.items()
                if kernel.family == family and kernel.layout is STRATEGIES.get(layout.name).layout)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.label)
def test_every_layout_on_flex_and_eager_passes_the_gate_with_soft_capping(gemma2: tuple,
                                                                         layout: StrategySpec) -> None:
    model, references = gemma2
    features = AttentionFeatures.of(model.config)
    assert features.softcap == 50 and features.layer_windows == (None, WINDOW)
    for family in ("flex", "eager"):
        kernel = kernels_of(family, layout)
        assert kernel.unsupported_reason(features, 24) is None
        assert gate(kernel, model, references, layout), f"{layout.label} on {kernel.name}"


@pytest.mark.parametrize("layout", [LAYOUTS[1], LAYOUTS[3]], ids=lambda layout: layout.label)
def test_a_flex_kernel_that_drops_the_cap_fails_the_gate(gemma2: tuple, layout: StrategySpec,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    model, references = gemma2
    monkeypatch.setattr(flex, "softcap_score_mod", lambda softcap, device: None)
    assert not gate(kernels_of("flex", layout), model, references, layout)


def test_which_kernels_apply_soft_capping() -> None:
    features = AttentionFeatures(query_heads=4, kv_heads=2, softcap=50.0, sliding_window=None)
    refused = {name: kernel.unsupported_reason(features, 64) for name, kernel in ATTENTION_KERNELS.items()}
    # flash-attn's kernels apply it where their library takes softcap; with none installed, availability refuses.
    assert sorted(name for name, reason in refused.items() if reason is not None) == [
        "sdpa", "sdpa-block-mask", "torch-flash", "torch-flash-varlen"]
    assert "torch-flash does not apply attention logit soft-capping (the model caps at 50)" in str(
        refused["torch-flash"])


def fake_flash_library(takes: tuple[str, ...], calls: list[dict[str, Any]]) -> SimpleNamespace:
    """A flash library whose functions take only `takes` besides the common arguments; records each call."""

    def function(query: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(kwargs)
        return query

    names = ("q", "k", "v", "softmax_scale", "causal", "window_size", *takes)
    function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for name in names])
    return SimpleNamespace(flash_attn_func=function, flash_attn_varlen_func=function)


def test_flash_kernels_detect_softcap_and_sinks_by_signature_and_pass_them(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    old = fake_flash_library((), calls)
    new = fake_flash_library(("softcap", "learnable_sink"), calls)
    monkeypatch.setitem(libraries.FLASH_MODULES, "flash-attn", lambda: old)
    monkeypatch.setitem(libraries.FLASH_MODULES, "flash-attn-cute", lambda: new)
    monkeypatch.setattr(ops, "flash_attn_module", lambda: old)
    libraries.flash_library_reason.cache_clear()
    try:
        features = AttentionFeatures(query_heads=4, kv_heads=2, softcap=50.0, sliding_window=None, sinks=True)
        reason = ATTENTION_KERNELS.get("flash-attn").unsupported_reason(features, 64)
        assert reason is not None and "flash-attn cannot apply attention logit soft-capping" in reason
        assert "flash_attn_func takes no softcap" in reason
        assert ATTENTION_KERNELS.get("flash-attn-cute-varlen").unsupported_reason(features, 64) is None
    finally:
        libraries.flash_library_reason.cache_clear()
    query, sinks = torch.zeros(1, 4, 4, 16), torch.ones(4, requires_grad=True)
    with torch.no_grad():
        ops.flash_attn_cute_dense(query, query, query, causal=True, softcap=50.0, sinks=sinks)
    assert calls[-1]["softcap"] == 50.0 and calls[-1]["learnable_sink"].dtype == torch.bfloat16
    ops.flash_attn_dense(query, query, query, causal=True)
    assert "softcap" not in calls[-1] and "learnable_sink" not in calls[-1]  # older versions lack them
    with pytest.raises(KernelUnavailable, match="no gradient for attention sinks"):
        ops.flash_attn_cute_dense(query, query, query, causal=True, sinks=sinks)
    trained = query.clone().requires_grad_()
    with pytest.raises(KernelUnavailable, match="backward takes no soft-capping"):
        ops.flash_attn_cute_varlen(trained[0], trained[0], trained[0], torch.tensor([0, 4], dtype=torch.int32),
                                   torch.tensor([0, 4], dtype=torch.int32), 4, 4, causal=True, softcap=50.0)


def causal_within(documents: torch.Tensor) -> Any:
    def same_document(batch: Any, head: Any, q_index: Any, kv_index: Any) -> Any:
        return (documents[batch, q_index] == documents[batch, kv_index]) & (q_index >= kv_index)

    return same_document


@pytest.mark.slow  # compiles FlexAttention for the CPU (about 15 s)
def test_compiled_flex_takes_the_cap_with_dynamic_shapes_and_a_document_mask() -> None:
    """The compiled path the GPU runs, here on the CPU: a cap captured as a Python float made inductor's flex
    lowering fail (`unbacked_bindings`) under dynamic shapes; the captured tensor compiles and matches."""
    torch.manual_seed(0)
    compiled = flex._compiled_flex()
    for length in (128, 256):  # a second length: the graph is dynamic, not specialised to the first
        documents = (torch.arange(length) >= length // 3).long()[None]
        mask = create_block_mask(causal_within(documents), 1, None, length, length, device="cpu")
        query, key = torch.randn(1, 4, length, 32) * 4, torch.randn(1, 2, length, 32) * 4
        options = {"block_mask": mask, "enable_gqa": True, "score_mod": flex.softcap_score_mod(5.0, CPU)}
        torch.testing.assert_close(compiled(query, key, key, **options),
                                   flex.flex_reference(query, key, key, **options), rtol=2e-4, atol=2e-4)


def test_the_eager_op_trains_through_the_cap() -> None:
    """Gradients through the materialised op with a cap equal those of the formula written out of place."""
    generator = torch.Generator().manual_seed(0)
    leaves = [torch.randn(2, 7, 4, 8, generator=generator).mul_(3).requires_grad_() for _ in range(3)]
    ops.naive_dense(*leaves, causal=True, softcap=5.0).square().sum().backward()
    got = [leaf.grad for leaf in leaves]
    query, key, value = (leaf.detach().clone().requires_grad_() for leaf in leaves)
    scores = query.transpose(1, 2) @ key.transpose(1, 2).transpose(-1, -2) * 8 ** -0.5
    scores = (5.0 * torch.tanh(scores / 5.0)).masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(), float("-inf"))
    (torch.softmax(scores, -1) @ value.transpose(1, 2)).transpose(1, 2).square().sum().backward()
    for a, b in zip(got, (query.grad, key.grad, value.grad), strict=True):
        assert a is not None and b is not None
        torch.testing.assert_close(a, b)


def test_compiled_flex_with_dynamic_shapes_stays_on_the_main_kernel() -> None:
    """Dynamic-shape calls (padded and packed rows, prefills) force FlexAttention's main kernel: the decoding
    kernel inductor would pick for 65–127 queries has no tile that fits the block mask's blocks. Decode steps
    (static shapes) keep their tuning, and the CPU's reference takes no options."""
    tuning = {"SPLIT_KV": 4}
    assert flex.compiled_kernel_options(True, False, None) == {"kernel_options": {"FORCE_USE_FLEX_ATTENTION": True}}
    assert flex.compiled_kernel_options(True, True, tuning) == {"kernel_options": tuning}
    assert flex.compiled_kernel_options(True, True, None) == {}
    assert flex.compiled_kernel_options(False, False, tuning) == {}


def test_heads_of_256_on_hopper_get_the_measured_backward_tiles() -> None:
    """Only the backward kernel of wide heads on Hopper is tuned (`bwd_` keys, which the forward drops); elsewhere
    inductor chooses, and a caller's own options (even `{}`, inductor's choice) replace the default."""
    tuned = flex.default_tuning(256, (9, 0))
    assert tuned is not None and all(key.startswith("bwd_") for key in tuned)
    assert flex.default_tuning(128, (9, 0)) is None
    assert flex.default_tuning(256, (8, 0)) is None
    assert flex.compiled_kernel_options(True, False, tuned) == {
        "kernel_options": {**tuned, "FORCE_USE_FLEX_ATTENTION": True}}


def test_flash_attention_3_calls_flash_attn_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashAttention-3's calls carry the window and soft-capping as flash_attn_interface names them; a model with
    attention sinks is refused, as FlashAttention-3 has none."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(libraries.FLASH_MODULES, "flash-attn-3", lambda: fake_flash_library(("softcap",), calls))
    dense = torch.zeros(1, 4, 4, 16)
    ops.flash_attn_3_dense(dense, dense, dense, causal=True, scale=0.25, window=3, softcap=30.0)
    assert calls[-1] == {"softmax_scale": 0.25, "causal": True, "window_size": (2, 0), "softcap": 30.0}
    packed, bounds = torch.zeros(8, 4, 16), torch.tensor([0, 3, 8], dtype=torch.int32)
    ops.flash_attn_3_varlen(packed, packed, packed, bounds, bounds, 5, 5, causal=True)
    assert {name: value for name, value in calls[-1].items() if not name.startswith("cu_seqlens")} == {
        "max_seqlen_q": 5, "max_seqlen_k": 5, "softmax_scale": None, "causal": True}
    assert calls[-1]["cu_seqlens_q"] is bounds and calls[-1]["cu_seqlens_k"] is bounds
    features = AttentionFeatures(query_heads=4, kv_heads=2, softcap=None, sliding_window=None, sinks=True)
    for name in ("flash-attn-3", "flash-attn-3-varlen"):
        assert "sinks" in (ATTENTION_KERNELS.get(name).unsupported_reason(features, 64) or "")
