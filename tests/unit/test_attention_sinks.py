"""Attention sinks (gpt-oss): a learned logit per head in every softmax's denominator, attending to nothing.

The ops and kernels that apply them are checked against a direct float64 softmax over [scores, sink] with
the sink's column dropped (transformers' gpt-oss eager attention), padded and packed, with and without a
sliding window; a kernel that drops the sinks must fail that check. The model-level tests run a tiny gpt-oss
through the correctness gate; gpt-oss is a mixture of experts, so they run once padbench accepts those.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from padbench.contract.model_spec import ModelSpec
from padbench.contract.spec import StrategySpec
from padbench.worker.engine.attention import ATTENTION_KERNELS, AttentionKernel, KernelUnavailable, flex, masks, ops
from padbench.worker.engine.attention.features import AttentionFeatures
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch
from padbench.worker.engine.decoding.cache import StepInputs
from padbench.worker.engine.decoding.registry import DECODE_KERNELS
from padbench.worker.engine.measure.correctness import reference_logits
from padbench.worker.engine.model.build import build_model, model_config
from padbench.worker.engine.model.support import UnsupportedModel
from padbench.worker.jobs.generate.gate import judge, reference_runs
from tests.unit.test_engine_attention_kernels import packed_batch, padded_batch, sequences
from tests.unit.test_generate_engine import decode, gate_set
from tests.unit.test_sliding_windows import gate, sample

CPU = torch.device("cpu")
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
LENGTHS = (7, 3, 12, 1, 9)
WINDOW = 4
# Sinks of the size of the logits, some above and some below: each changes its head's output noticeably.
SINKS = torch.tensor([2.0, -1.0, 0.5, 4.0])


def attention_with_sinks(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor,
                         sinks: torch.Tensor, scale: float) -> torch.Tensor:
    """float64 softmax([scores, sink]) without the sink's column, times V; (batch, seq, heads, dim) in and out.

    `allowed` (batch or 1, 1, q, k) is True where a query may attend to a key.
    """
    q, k, v = (t.double().transpose(1, 2) for t in (query, *ops.expand_kv_heads(query, key, value)))
    scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~allowed, -math.inf)
    sink_column = sinks.double().view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
    weights = torch.softmax(torch.cat([scores, sink_column], dim=-1), dim=-1)[..., :-1]
    return (weights @ v).transpose(1, 2)


def qkv(tokens: int, rows: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    query = torch.randn(rows, tokens, HEADS, HEAD_DIM, generator=generator) * 2
    key, value = (torch.randn(rows, tokens, KV_HEADS, HEAD_DIM, generator=generator) for _ in range(2))
    return query, key, value


def padded_case(window: int | None) -> tuple[torch.Tensor, torch.Tensor, Any]:
    lengths = torch.tensor(LENGTHS)
    width = max(LENGTHS)
    return (masks.padding_causal(lengths, width, window), masks.padding_causal_block_mask(lengths, width, window),
            lengths)


def packed_case(window: int | None) -> tuple[torch.Tensor, Any, torch.Tensor]:
    documents = torch.repeat_interleave(torch.arange(len(LENGTHS), dtype=torch.int32), torch.tensor(LENGTHS))
    return (masks.block_diagonal_causal(documents, window)[None, None],
            masks.document_causal_block_mask(documents, window), documents)


def real_positions(layout: str, shape: tuple[int, ...]) -> torch.Tensor:
    """Where outputs are read: every packed token, only real tokens of padded rows (pads compute garbage)."""
    if layout == "packed":
        return torch.ones(shape[:2], dtype=torch.bool)
    return torch.arange(shape[1])[None, :] < torch.tensor(LENGTHS)[:, None]


@pytest.mark.parametrize("window", [None, WINDOW], ids=["full", "window"])
@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_eager_and_flex_ops_apply_sinks_as_a_float64_softmax_with_the_sink(layout: str, window: int | None) -> None:
    dense, block_mask, _ = padded_case(window) if layout == "padded" else packed_case(window)
    rows, tokens = (len(LENGTHS), max(LENGTHS)) if layout == "padded" else (1, sum(LENGTHS))
    query, key, value = qkv(tokens, rows)
    scale = HEAD_DIM ** -0.5
    expected = attention_with_sinks(query, key, value, dense, SINKS, scale)
    real = real_positions(layout, query.shape)
    eager = ops.naive_dense(query, key, value, causal=False, scale=scale, mask=dense, sinks=SINKS)
    flexed = flex.flex_dense(query, key, value, block_mask, scale=scale, sinks=SINKS)
    for got in (eager, flexed):
        assert float((got.double() - expected)[real].abs().max()) < 1e-5
    without = ops.naive_dense(query, key, value, causal=False, scale=scale, mask=dense)
    assert float((without.double() - expected)[real].abs().max()) > 1e-2  # the sinks matter here


def test_sinks_compose_with_soft_capping_in_flex() -> None:
    dense, block_mask, _ = packed_case(WINDOW)
    query, key, value = qkv(sum(LENGTHS))
    eager = ops.naive_dense(query * 8, key, value, causal=False, mask=dense, softcap=5.0, sinks=SINKS)
    flexed = flex.flex_dense(query * 8, key, value, block_mask, softcap=5.0, sinks=SINKS)
    assert float((eager - flexed).abs().max()) < 1e-5


class SinkDroppingFlex(type(ATTENTION_KERNELS.get("flex-document-mask"))):  # type: ignore[misc]
    """A deliberately broken kernel: it claims sinks and drops them."""

    name = "test-sink-dropping-flex"

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, *,
               padbench_sinks: torch.Tensor | None = None, **inputs: Any) -> torch.Tensor:
        return super().attend(query, key, value, scale, **inputs)


def through_the_bridge(kernel: AttentionKernel, batch: Batch, window: int | None) -> torch.Tensor:
    """The kernel called as a model layer calls it: transformers' (batch, heads, seq, dim) and `s_aux`."""
    batch = kernel.per_forward(kernel.prepare(batch, (window,)), (window,))
    inputs = {name: value for name, value in kernel.model_inputs(batch).items() if name.startswith("padbench_")}
    query, key, value = (t.transpose(1, 2) for t in qkv(batch.input_ids.shape[1], batch.input_ids.shape[0]))
    output, _ = kernel._transformers_attention(torch.nn.Module(), query, key, value, None, scaling=HEAD_DIM ** -0.5,
                                               sliding_window=window, s_aux=SINKS, **inputs)
    return output


@pytest.mark.parametrize("name", ["eager", "eager-block-mask", "flex-padding-mask", "flex-document-mask"])
def test_kernels_take_sinks_from_the_model_and_a_kernel_that_drops_them_fails(name: str) -> None:
    kernel = ATTENTION_KERNELS.get(name)
    packed = kernel.layout is PackedBatch
    seqs = sequences(LENGTHS)
    batch = packed_batch(seqs) if packed else padded_batch(seqs)
    dense = (packed_case if packed else padded_case)(WINDOW)[0]
    query, key, value = qkv(batch.input_ids.shape[1], batch.input_ids.shape[0])
    expected = attention_with_sinks(query, key, value, dense, SINKS, HEAD_DIM ** -0.5)
    real = real_positions("packed" if packed else "padded", query.shape)

    def error(candidate: AttentionKernel) -> float:
        return float((through_the_bridge(candidate, batch, WINDOW).double() - expected)[real].abs().max())

    assert error(kernel) < 1e-5
    if name == "flex-document-mask":
        assert error(SinkDroppingFlex()) > 1e-2


def test_kernels_without_sinks_are_refused_with_the_reason_and_at_call_time() -> None:
    features = AttentionFeatures(query_heads=HEADS, kv_heads=KV_HEADS, softcap=None, sliding_window=None, sinks=True)
    for name, kernel in ATTENTION_KERNELS.items():
        reason = kernel.unsupported_reason(features, 64)
        assert (reason is None) == kernel.applies_sinks, name
        if reason is not None:
            assert f"{name} does not apply attention sinks" in reason
    assert sorted(name for name, kernel in ATTENTION_KERNELS.items() if kernel.applies_sinks) == [
        "eager", "eager-block-mask", "flash-attn-cute", "flash-attn-cute-varlen", "flex-document-mask",
        "flex-padding-mask"]
    with pytest.raises(KernelUnavailable, match="does not apply attention sinks"):
        through_the_bridge(ATTENTION_KERNELS.get("sdpa"), padded_batch(sequences(LENGTHS)), None)


def test_eager_kvcache_applies_sinks_and_the_others_refuse() -> None:
    query, key, value = qkv(12)
    q, k, v = query[0, -3:], key[0], value[0]  # the last 3 queries of a 12-token sequence, bottom-right causal
    allowed = ops.causal_allowed(3, 12, CPU)[None, None] & (torch.arange(12)[None, :] > torch.arange(9, 12)[:, None]
                                                            - WINDOW)[None, None]
    expected = attention_with_sinks(q[None], k[None], v[None], allowed, SINKS, 0.25)[0]
    got = DECODE_KERNELS.get("eager-kvcache").attend_one(q, k, v, 0.25, None, WINDOW, SINKS)
    assert float((got.double() - expected).abs().max()) < 1e-5
    assert DECODE_KERNELS.get("eager-kvcache").unsupported_reason(None, sinks=True) is None
    reason = DECODE_KERNELS.get("sdpa-kvcache").unsupported_reason(None, sinks=True)
    assert reason is not None and "does not apply attention sinks" in reason


# --- a tiny gpt-oss through the correctness gate ------------------------------------------------------------

TINY_GPT_OSS: dict[str, Any] = {
    "model_type": "gpt_oss", "hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": 30522,
    "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
    "layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 256}


def moe_refusal() -> str | None:
    """Why padbench refuses the tiny gpt-oss (a mixture of experts) today; None once it accepts it."""
    try:
        model_config(ModelSpec(config=TINY_GPT_OSS))
    except UnsupportedModel as error:
        return str(error)
    return None


needs_moe = pytest.mark.skipif(moe_refusal() is not None, reason=f"padbench refuses the model: {moe_refusal()}")


@pytest.fixture(scope="module")
def gpt_oss() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model = build_model(ModelSpec(config=TINY_GPT_OSS), torch.float32, CPU, seed=0)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(SINKS)  # random init draws them near 0, where they barely matter
    return model, reference_logits(model, sample(), CPU, eager=True)  # gpt-oss's own eager attention


@needs_moe
@pytest.mark.parametrize("layout", ["static", "binned", "packed"])
def test_gpt_oss_passes_the_gate_on_eager_and_flex_and_fails_without_sinks(gpt_oss: tuple, layout: str) -> None:
    model, references = gpt_oss
    assert AttentionFeatures.of(model.config).sinks
    spec = StrategySpec(name=layout, n_bins=2) if layout == "binned" else StrategySpec(name=layout)
    for family in ("eager", "flex"):
        kernel = next(k for _, k in ATTENTION_KERNELS.items()
                      if k.family == family and k.layout is STRATEGIES.get(layout).layout)
        assert gate(kernel, model, references, spec), f"{layout} on {kernel.name}"
    if layout == "packed":
        assert not gate(SinkDroppingFlex(), model, references, spec)


class WindowDroppingFlexDecode(type(DECODE_KERNELS.get("flex-kvcache"))):  # type: ignore[misc]
    """flex-kvcache as it would be if it ignored the sliding window: every layer attends the whole range."""

    name = "flex-kvcache-without-window"

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: StepInputs, scale: float,
               softcap: float | None, window: int | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
        return super().attend(q, keys, values, step, scale, softcap, None, sinks)


@needs_moe
@pytest.mark.parametrize("strategy", ["static", "continuous"])
def test_gpt_oss_generates_on_eager_and_flex_kvcache_and_sdpa_kvcache_refuses(gpt_oss: tuple, strategy: str) -> None:
    """Sinks and a window shorter than the requests (8 tokens, every other layer), through the generate gate."""
    model, _ = gpt_oss
    requests = gate_set(int(model.config.vocab_size))[:4]
    references = reference_runs(model, requests, CPU, "fp32")
    for name in ("eager-kvcache", "flex-kvcache"):
        decoder = decode(model, DECODE_KERNELS.get(name), strategy, requests)
        outcome = judge(requests, references, decoder.generated, decoder.first_logits, "fp32")
        assert outcome.passed, f"{name}: {outcome.detail}"
    dropped = decode(model, WindowDroppingFlexDecode(), strategy, requests)
    assert not judge(requests, references, dropped.generated, dropped.first_logits, "fp32").passed
    with pytest.raises(KernelUnavailable, match="does not apply attention sinks"):
        decode(model, DECODE_KERNELS.get("sdpa-kvcache"), "static", requests[:2])
