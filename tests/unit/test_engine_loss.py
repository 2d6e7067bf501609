"""The training losses: the chunked linear cross-entropy against the full logits, the head passed through a
model's forward, the loss gate, and the phase split of a training step."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.attention import resolve_kernel
from padbench.worker.engine.data.batches import Batch, PaddedBatch
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.model.lm_head import AlignedLMHead, align_lm_head
from padbench.worker.engine.training import loss as loss_module
from padbench.worker.engine.training.chunked_loss import (
    IGNORE_INDEX,
    LossShape,
    chunk_tokens,
    chunked_linear_cross_entropy,
)
from padbench.worker.engine.training.loss import (
    LIGER_CHUNK_LOGITS_BYTES,
    ChunkedLoss,
    FullLogitsLoss,
    FusedLoss,
    FusedLossUnsupported,
    HeadWeights,
    LigerLoss,
    liger_chunk_mem_const,
    liger_takes_chunking,
    passthrough_head,
    resolve_loss,
)
from padbench.worker.engine.training.loss_check import check_fused_loss
from padbench.worker.engine.training.step_split import time_step_phases
from padbench.worker.engine.training.steps import make_optimizer, next_token_labels, training_step

VOCAB, HIDDEN, TOKENS = 517, 24, 300  # a vocabulary no chunk size divides


def full_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              softcap: float | None = None) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias).float()
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    return F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX)


def operands(dtype: torch.dtype, bias: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(TOKENS, HIDDEN, generator=generator).to(dtype).requires_grad_()
    weight = (0.3 * torch.randn(VOCAB, HIDDEN, generator=generator)).to(dtype).requires_grad_()
    head_bias = torch.randn(VOCAB, generator=generator).to(dtype).requires_grad_() if bias else None
    labels = torch.randint(0, VOCAB, (TOKENS,), generator=generator)
    labels[::7] = IGNORE_INDEX  # positions that predict nothing: no loss, no gradient
    return hidden, weight, head_bias, labels


def relative(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float((value.float() - reference.float()).norm() / reference.float().norm())


@pytest.mark.parametrize(("dtype", "loss_tolerance", "gradient_tolerance"),
                         [(torch.float32, 1e-6, 1e-5), (torch.bfloat16, 1e-3, 2e-2)])
@pytest.mark.parametrize("softcap", [None, 5.0])
@pytest.mark.parametrize("bias", [False, True])
def test_chunked_loss_and_gradients_are_the_full_logits(dtype: torch.dtype, loss_tolerance: float,
                                                        gradient_tolerance: float, softcap: float | None,
                                                        bias: bool) -> None:
    hidden, weight, head_bias, labels = operands(dtype, bias)
    inputs = [tensor for tensor in (hidden, weight, head_bias) if tensor is not None]
    reference = full_loss(hidden, weight, head_bias, labels, softcap)
    expected = torch.autograd.grad(reference, inputs)
    # 64-token chunks: the last one short (300 = 4 × 64 + 44); the weight padded as an aligned head pads it
    padded_weight = F.pad(weight, (0, 0, 0, 11))
    padded_bias = None if head_bias is None else F.pad(head_bias, (0, 11))
    loss = chunked_linear_cross_entropy(hidden, padded_weight, padded_bias, labels, LossShape(VOCAB, softcap, 64))
    gradients = torch.autograd.grad(loss, inputs)
    assert loss.dtype == torch.float32
    assert abs(float(loss.detach()) - float(reference.detach())) <= loss_tolerance * float(reference.detach())
    for gradient, want in zip(gradients, expected, strict=True):
        assert gradient.dtype == want.dtype and gradient.shape == want.shape
        assert relative(gradient, want) <= gradient_tolerance
    assert float(gradients[0][::7].abs().max()) == 0.0  # ignored positions get no gradient


def test_a_chunk_holds_about_256_mib_of_logits() -> None:
    assert chunk_tokens(151_936) == 441 and chunk_tokens(32_000) == 2097
    assert chunk_tokens(10_000_000) == 64  # never thinner than the GEMMs can run


def test_the_backward_scales_by_the_incoming_gradient() -> None:
    hidden, weight, _, labels = operands(torch.float32, bias=False)
    (3 * chunked_linear_cross_entropy(hidden, weight, None, labels, LossShape(VOCAB, chunk=100))).backward()
    expected = torch.autograd.grad(3 * full_loss(hidden, weight, None, labels), hidden)[0]
    assert hidden.grad is not None and relative(hidden.grad, expected) < 1e-5


def test_under_autocast_the_head_computes_in_the_autocast_dtype() -> None:
    hidden, weight, _, labels = operands(torch.float32, bias=False)
    head = HeadWeights(weight, None, 0, None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = ChunkedLoss().of_hidden(hidden, head, labels)
        reference = full_loss(hidden, weight, None, labels)
    (weight_gradient,) = torch.autograd.grad(loss, weight)
    assert weight_gradient.dtype == torch.float32  # through the cast back to the fp32 master weight
    assert abs(float(loss.detach()) - float(reference.detach())) < 1e-2 * float(reference.detach())


def tiny(preset: str) -> nn.Module:
    return build_model(ModelSpec(preset=preset), torch.float32, torch.device("cpu"), seed=0)


def padded_batch(vocab: int) -> PaddedBatch:
    ids = torch.randint(1, vocab, (2, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return PaddedBatch(input_ids=ids, attention_mask=mask, sequence_ids=(0, 1), lengths=(12, 9))


def eager_forward(model: nn.Module, batch: Batch) -> torch.Tensor:
    kernel = resolve_kernel("eager", PaddedBatch, torch.device("cpu"), torch.float32)
    return kernel.forward(model, kernel.prepare(batch))


@pytest.mark.parametrize("preset", ["tiny-llama", "tiny-gpt2", "tiny-gemma2"])
def test_the_fused_loss_through_a_model_is_the_full_loss(preset: str) -> None:
    """An untied aligned head (llama), a tied one (gpt2), final logit soft-capping (gemma2)."""
    model = tiny(preset)
    batch = padded_batch(model.config.vocab_size)
    labels = next_token_labels(batch)
    with torch.no_grad():
        full = FullLogitsLoss()(model, eager_forward, batch, labels)
        fused = ChunkedLoss()(model, eager_forward, batch, labels)
    assert float(fused) == pytest.approx(float(full), rel=1e-5)
    head = model.get_output_embeddings()
    assert not isinstance(head, type(None)) and type(head).__name__ != "HeadPassthrough"  # the head is back
    assert getattr(model.config, "final_logit_softcapping", None) == (30.0 if preset == "tiny-gemma2" else None)
    check = check_fused_loss(ChunkedLoss(), model, eager_forward, batch, labels, torch.float32)
    assert check.passed and check.loss_error < 1e-5 and check.gradient_error < 1e-4, check


def test_amp_on_one_device_computes_the_head_in_the_autocast_dtype_after_the_forward(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """amp on one GPU wraps only the forward in autocast; the fused loss runs after it, on hidden states the final
    norm's fp32 weight left in fp32, and must still compute the head's GEMM in autocast's dtype."""
    model = tiny("tiny-llama")
    batch = padded_batch(model.config.vocab_size)
    seen: list[torch.dtype] = []
    real = loss_module.chunked_linear_cross_entropy

    def spy(hidden: torch.Tensor, weight: torch.Tensor, *rest: object) -> torch.Tensor:
        seen.extend([hidden.dtype, weight.dtype])
        return real(hidden, weight, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(loss_module, "chunked_linear_cross_entropy", spy)

    def amp_forward(model: nn.Module, batch: Batch) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return eager_forward(model, batch)

    loss = ChunkedLoss()(model, amp_forward, batch, next_token_labels(batch))
    assert seen == [torch.bfloat16, torch.bfloat16]
    loss.backward()
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())


def test_the_passthrough_sees_the_real_vocabulary_of_an_aligned_head() -> None:
    model = align_lm_head(tiny("tiny-llama"))
    head = model.get_output_embeddings()
    assert isinstance(head, AlignedLMHead) and head.padding_rows > 0
    with torch.no_grad(), passthrough_head(model) as passthrough:
        hidden = eager_forward(model, padded_batch(model.config.vocab_size))
    assert passthrough.seen is not None and passthrough.seen.vocab == model.config.vocab_size
    assert passthrough.seen.padding_rows == head.padding_rows and hidden.shape[-1] == model.config.hidden_size
    assert model.get_output_embeddings() is head


class WrongLoss(FusedLoss):
    name = "wrong"

    def fused(self, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, labels: torch.Tensor,
              head: HeadWeights) -> torch.Tensor:
        return full_loss(hidden, 1.1 * weight, bias, labels)


def test_the_gate_fails_a_fused_loss_that_computes_something_else() -> None:
    model = tiny("tiny-llama")
    batch = padded_batch(model.config.vocab_size)
    check = check_fused_loss(WrongLoss(), model, eager_forward, batch, next_token_labels(batch), torch.float32)
    assert not check.passed and check.reason is not None
    assert check.reason.startswith("wrong: loss") and "gradients off by" in check.reason


def test_a_head_that_is_no_linear_layer_is_refused() -> None:
    model = tiny("tiny-llama")
    model.set_output_embeddings(nn.Sequential(model.get_output_embeddings()))
    with pytest.raises(FusedLossUnsupported, match="needs a linear LM head"), passthrough_head(model):
        pass


def test_the_loss_choices_resolve_on_the_cpu() -> None:
    assert resolve_loss("fused", torch.device("cpu")).name == "chunked-linear-cross-entropy"
    assert resolve_loss("full", torch.device("cpu")).name == "full-logits"


def test_the_phase_split_times_every_phase() -> None:
    model = tiny("tiny-llama")
    batch = padded_batch(model.config.vocab_size)
    step = training_step(model, eager_forward, [batch], [next_token_labels(batch)], make_optimizer(model),
                         ChunkedLoss())
    before = [parameter.detach().clone() for parameter in model.parameters()]
    split = time_step_phases(step, [0, 0], torch.device("cpu"))
    assert split.steps == 2 and split.forward_s > 0 and split.backward_s > 0 and split.optimizer_s > 0
    assert any(not torch.equal(old, new) for old, new in zip(before, model.parameters(), strict=True))
    assert all(parameter.grad is None for parameter in model.parameters())  # zeroed as a step leaves them


def liger_chunking(tokens: int, hidden: int, vocab: int, chunk_mem_const: int) -> tuple[int, int]:
    """Liger's own arithmetic (liger_kernel.ops.fused_linear_cross_entropy): tokens a chunk, and chunks."""
    split = -(-vocab // (chunk_mem_const * hidden))
    chunk = min(1 << (-(-tokens // split) - 1).bit_length(), tokens)
    return chunk, -(-tokens // chunk)


@pytest.mark.parametrize(("tokens", "hidden", "vocab", "chunks", "default_chunks"), [
    (4096, 2304, 256000, 4, 64),  # gemma-2-2b at 4 × 1024 tokens
    (10240, 2048, 151936, 5, 40),  # qwen3-1.7b at 16 × 640
    (64, 2048, 151936, 1, 64),  # a short batch: Liger's default cuts it into 64 chunks of one token
])
def test_liger_chunks_are_thick_and_hold_about_the_logits_budget(tokens: int, hidden: int, vocab: int, chunks: int,
                                                                default_chunks: int) -> None:
    chunk, count = liger_chunking(tokens, hidden, vocab, liger_chunk_mem_const(tokens, hidden, vocab, itemsize=2))
    assert count == chunks and chunk * vocab * 2 <= 2 * LIGER_CHUNK_LOGITS_BYTES
    assert liger_chunking(tokens, hidden, vocab, chunk_mem_const=1)[1] == default_chunks  # Liger's own default


def test_the_liger_loss_asks_for_its_chunking_and_keeps_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    # Liger needs Triton on a GPU: a stand-in with its functional signature records what it is asked for.
    asked: list[tuple[int, float | None]] = []

    def functional(input: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, bias: torch.Tensor | None = None,
                   ignore_index: int = -100, softcap: float | None = None, chunk_mem_const: int = 1) -> torch.Tensor:
        asked.append((chunk_mem_const, softcap))
        return full_loss(input, weight, bias, target, softcap)

    liger = types.ModuleType("liger_kernel.transformers")
    liger.LigerFusedLinearCrossEntropyLoss = object  # type: ignore[attr-defined]
    functional_module = types.ModuleType("liger_kernel.transformers.functional")
    functional_module.liger_fused_linear_cross_entropy = functional  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "liger_kernel", types.ModuleType("liger_kernel"))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", liger)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers.functional", functional_module)
    generator = torch.Generator().manual_seed(0)
    hidden, weight = torch.randn(TOKENS, HIDDEN, generator=generator), torch.randn(VOCAB, HIDDEN, generator=generator)
    labels = torch.randint(VOCAB, (TOKENS,), generator=generator)
    liger_takes_chunking.cache_clear()  # asked of the stand-in, not of whatever answered before
    try:
        loss = LigerLoss().fused(hidden, weight, None, labels, HeadWeights(weight, None, 0, 30.0))
    finally:
        liger_takes_chunking.cache_clear()
    assert asked == [(liger_chunk_mem_const(TOKENS, HIDDEN, VOCAB, hidden.element_size()), 30.0)]
    torch.testing.assert_close(loss, full_loss(hidden, weight, None, labels, 30.0))
