"""Every attention kernel that runs on this CPU computes the same logits as one sequence at a time."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from padbench.contract.kernel_families import flash_families
from padbench.contract.kinds import parse_job_spec
from padbench.contract.spec import ModelSpec
from padbench.worker.engine import attention
from padbench.worker.engine.attention import ATTENTION_KERNELS, KernelUnavailable, available_kernels, resolve_kernel
from padbench.worker.engine.data.batches import PackedBatch, PaddedBatch
from padbench.worker.engine.model.build import DEFAULT_ATTENTION, build_model

CPU = torch.device("cpu")
LENGTHS = (7, 3, 12, 1, 9)
# Relative to the logit scale: fp32 kernels differ from the reference only in reduction order.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 4e-2}


def sequences(lengths: tuple[int, ...] = LENGTHS, vocab: int = 30522) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(1, vocab, (length,), generator=generator) for length in lengths]


def padded_batch(seqs: list[torch.Tensor]) -> PaddedBatch:
    width = max(len(s) for s in seqs)
    input_ids = torch.zeros(len(seqs), width, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, seq in enumerate(seqs):
        input_ids[row, :len(seq)] = seq
        attention_mask[row, :len(seq)] = 1
    return PaddedBatch(input_ids, attention_mask, tuple(len(s) for s in seqs), tuple(range(len(seqs))))


def packed_batch(seqs: list[torch.Tensor]) -> PackedBatch:
    lengths = [len(s) for s in seqs]
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]
    return PackedBatch(input_ids=torch.cat(seqs)[None], position_ids=position_ids, cu_seqlens=cu_seqlens,
                       max_seqlen=max(lengths), lengths=tuple(lengths),
                       sequence_ids=tuple(range(len(seqs))), token_budget=sum(lengths))


def per_sequence(batch: PaddedBatch | PackedBatch, logits: torch.Tensor) -> list[torch.Tensor]:
    if isinstance(batch, PackedBatch):
        return list(logits[0].split(list(batch.lengths)))
    return [logits[row, :length] for row, length in enumerate(batch.lengths)]


def assert_matches(batch: PaddedBatch | PackedBatch, logits: torch.Tensor, reference: list[torch.Tensor]) -> None:
    scale = max(float(r.float().abs().max()) for r in reference)
    tolerance = TOLERANCE[reference[0].dtype] * scale
    for got, expected in zip(per_sequence(batch, logits), reference, strict=True):
        assert got.shape == expected.shape
        assert float((got.float() - expected.float()).abs().max()) <= tolerance


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def model_and_reference(request: pytest.FixtureRequest) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    model = build_model(ModelSpec(preset="tiny"), request.param, CPU, seed=0)
    with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH):
        reference = [model(input_ids=seq[None]).logits[0] for seq in sequences()]
    return model, reference


@pytest.mark.parametrize("kernel_name", list(ATTENTION_KERNELS))
def test_kernel_matches_one_sequence_reference(kernel_name: str, model_and_reference: tuple) -> None:
    model, reference = model_and_reference
    dtype = next(model.parameters()).dtype
    kernel = ATTENTION_KERNELS.get(kernel_name)
    reason = kernel.unavailable_reason(CPU, dtype)
    if reason is not None:
        pytest.skip(f"{kernel_name} does not run on this CPU in {dtype}: {reason}")
    build = padded_batch if kernel.layout is PaddedBatch else packed_batch
    batch = kernel.prepare(build(sequences()))
    with torch.inference_mode():
        assert_matches(batch, kernel.forward(model, batch), reference)


def reference_varlen(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens_q: torch.Tensor,
                     cu_seqlens_k: torch.Tensor, max_q: int, max_k: int, *, causal: bool,
                     scale: float | None = None, window: int | None = None) -> torch.Tensor:
    """The varlen contract computed one sequence at a time (test only: it loops and reads the device).

    A window is read as flash kernels read their (left, right) `window_size`: the query attends to itself and
    the `left` keys before it.
    """
    left, _ = attention.ops.flash_window(window)
    bounds = cu_seqlens_q.tolist()
    pieces = []
    for a, b in itertools.pairwise(bounds):
        positions = torch.arange(b - a)
        near = positions[:, None] - positions[None, :] <= (left if left >= 0 else b - a)
        pieces.append(attention.ops.naive_dense(query[None, a:b], key[None, a:b], value[None, a:b], causal=causal,
                                                scale=scale, mask=near)[0])
    return torch.cat(pieces)


class ReferenceVarlen(attention.packed.VarlenKernel):
    """The varlen plumbing on the one-sequence-at-a-time op: a kernel outside any family sets its own facts."""

    name, family = "test-reference-varlen", "test"
    applies_window = True
    varlen = staticmethod(reference_varlen)


def test_varlen_plumbing_matches_reference(model_and_reference: tuple) -> None:
    """cu_seqlens and max lengths reach the op intact and its output is laid back correctly."""
    model, reference = model_and_reference
    kernel = ReferenceVarlen()
    batch = kernel.prepare(packed_batch(sequences()))
    with torch.inference_mode():
        assert_matches(batch, kernel.forward(model, batch), reference)


def test_forward_restores_the_models_attention_implementation() -> None:
    model = build_model(ModelSpec(preset="tiny"), torch.float32, CPU, seed=0)
    kernel = ATTENTION_KERNELS.get("sdpa-block-mask")
    with torch.inference_mode():
        kernel.forward(model, kernel.prepare(packed_batch(sequences())))
    assert model.config._attn_implementation == DEFAULT_ATTENTION


def test_packed_forward_skips_transformers_mask_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    # transformers' packed-sequence detection reads position ids back from the device on every forward.
    import transformers.masking_utils as masking

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the mask builder ran")

    monkeypatch.setattr(masking, "find_packed_sequence_indices", refuse)
    monkeypatch.setattr(masking, "sdpa_mask", refuse)
    model = build_model(ModelSpec(preset="tiny"), torch.float32, CPU, seed=0)
    kernel = ATTENTION_KERNELS.get("flex-document-mask")
    with torch.inference_mode():
        kernel.forward(model, kernel.prepare(packed_batch(sequences())))


def test_cross_sequence_attention_is_caught() -> None:
    """Sanity check of the test itself: packing without the block mask changes the logits."""
    model = build_model(ModelSpec(preset="tiny"), torch.float32, CPU, seed=0)
    batch = packed_batch(sequences())
    with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH):
        leaky = model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                      attention_mask=torch.ones_like(batch.input_ids)).logits
        alone = model(input_ids=sequences()[1][None]).logits[0]
    assert float((per_sequence(batch, leaky)[1] - alone).abs().max()) > 1e-2


def test_flash_resolves_to_torch_flash_for_padded_rows_on_cpu() -> None:
    assert resolve_kernel("flash", PaddedBatch, CPU, torch.bfloat16).name == "torch-flash"


def test_flash_prefers_flash_attn_cute_when_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    cute = attention.kernel_for("flash-attn-cute", PackedBatch)
    monkeypatch.setattr(cute, "unavailable_reason", lambda device, dtype: None)
    assert resolve_kernel("flash", PackedBatch, CPU, torch.bfloat16).name == "flash-attn-cute-varlen"


def test_flash_on_fp32_is_refused_naming_the_kernel() -> None:
    with pytest.raises(KernelUnavailable, match=r"'torch-flash'.*bf16 or fp16"):
        resolve_kernel("torch-flash", PaddedBatch, CPU, torch.float32)


def test_flash_with_nothing_available_lists_every_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    for family in flash_families("packed"):
        kernel = attention.kernel_for(family.name, PackedBatch)
        monkeypatch.setattr(kernel, "unavailable_reason", lambda device, dtype: "absent here")
    with pytest.raises(KernelUnavailable) as raised:
        resolve_kernel("flash", PackedBatch, CPU, torch.bfloat16)
    message = str(raised.value)
    assert "'flash'" in message
    assert all(name in message for name in ("flash-attn-cute-varlen", "flash-attn-varlen", "torch-flash-varlen"))


def test_missing_package_is_unavailable_naming_the_kernel() -> None:
    if attention.libraries.optional_module("flash_attn") is not None:
        pytest.skip("flash_attn is installed here")
    with pytest.raises(KernelUnavailable, match=r"'flash-attn-varlen'.*not importable"):
        resolve_kernel("flash-attn", PackedBatch, CPU, torch.bfloat16)


@pytest.mark.parametrize(("asked", "kernel", "package"), [
    ("flash_attention_3", "flash-attn-3", "flash_attn_interface"),
    ("flash_attention_4", "flash-attn-cute", "flash_attn.cute"),
])
def test_transformers_flash_names_run_their_own_kernel_or_name_the_missing_package(asked: str, kernel: str,
                                                                                    package: str) -> None:
    """FlashAttention-3 and -4 where they are installed; where not, the package that is missing, never a fallback."""
    family = parse_job_spec({"attention": asked}).attention  # type: ignore[attr-defined]
    assert family == kernel
    for layout, name in ((PaddedBatch, kernel), (PackedBatch, f"{kernel}-varlen")):
        if attention.libraries.optional_module(package) is not None:
            assert resolve_kernel(family, layout, CPU, torch.bfloat16).name == name
            continue
        with pytest.raises(KernelUnavailable, match=rf"'{name}'.*{re.escape(package)} .*is not importable"):
            resolve_kernel(family, layout, CPU, torch.bfloat16)


def test_available_kernels_lists_what_runs_on_cpu() -> None:
    names = available_kernels("cpu")
    assert {"sdpa", "eager", "eager-block-mask", "sdpa-block-mask"} <= set(names)
    assert "flash-attn-varlen" not in names or attention.libraries.optional_module("flash_attn") is not None
