"""The correctness gate: every layout must compute the same function as one sequence at a time.

A benchmark that packs sequences wrongly (position ids that do not restart, attention leaking across
sequence boundaries, padding attended to) runs *faster* than a correct one, so throughput alone can never
vouch for a layout. Before a strategy is timed, a sample of sequences goes through it and its logits at the
real positions are compared with an unpadded reference: the same model, one sequence per call, on
transformers' SDPA path pinned to torch's math backend (independent of every kernel under test, and
accumulating in fp32 as the flash kernels do), or on the family's own eager code where transformers has no
SDPA path for it (Gemma 2, whose soft-capping SDPA cannot apply). Eager attention multiplies and
normalises its scores in the model's dtype: on a 32-layer Llama in bf16 it differed from every flash
layout by 0.56, twice the tolerance, while the layouts agreed with each other. The reference is kept on the host so it
never inflates a strategy's device memory peak.

Tolerances are relative to the logit scale (the largest |logit| of the reference), because an absolute
figure means nothing without it, and depend on the dtype:
- fp32: 1e-4. Layouts only change reduction order; fp32 (24-bit mantissa) keeps that near 1e-6, so 1e-4
  leaves room for a different kernel yet catches any real mistake.
- fp16: 1e-2. An 11-bit mantissa (unit roundoff 4.9e-4) accumulated through every layer's matmuls and
  softmax with another reduction order stays a few 1e-3 of the logit scale.
- bf16: 4e-2. Only 8 bits of mantissa (unit roundoff 3.9e-3), eight times coarser than fp16; differently
  tiled flash kernels against the math reference differ by about 1e-2 of the scale on a 12-layer model.
A broken packing moves logits by a large fraction of the scale (the tests measure it), far above these.

Deep models in bf16 need more: on a 32-layer Llama with random weights every flash layout differed from the
reference by 6% of the scale while the layouts agreed with each other, because each layer amplifies the
rounding of the one before. So the gate also measures its own noise floor — how far two correct
computations of the same sequences (SDPA math and the family's eager code, one sequence at a time) differ —
and never sets the tolerance below twice that.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from padbench.contract.spec import Dtype
from padbench.worker.engine.data.batches import Batch, PackedBatch
from padbench.worker.engine.model.build import config_of
from padbench.worker.engine.model.experts import experts_as, experts_implementation
from padbench.worker.engine.training.steps import without_autograd

RELATIVE_TOLERANCE: dict[str, float] = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 4e-2}
NOISE_MARGIN = 2.0  # the tolerance is at least this multiple of the reference's own noise floor

BatchLogitsFn = Callable[[Batch], torch.Tensor]  # logits for a prepared, device-resident batch


@dataclass(frozen=True)
class GateResult:
    passed: bool
    max_error: float | None  # largest |logit − reference| over the real positions checked
    tolerance: float  # absolute: the dtype's relative tolerance × the reference's logit scale
    reason: str | None = None


def gate_sample(lengths: Sequence[int], count: int) -> list[int]:
    """Indices of `count` sequences spread over the length range, always including the shortest and longest.

    The longest sequences exercise the highest position ids; the shortest the widest padding.
    """
    if count >= len(lengths):
        return list(range(len(lengths)))
    order = sorted(range(len(lengths)), key=lambda index: (lengths[index], index))
    if count == 1:
        return [order[-1]]
    step = (len(order) - 1) / (count - 1)
    return sorted({order[round(k * step)] for k in range(count)})


def has_sdpa_path(model: torch.nn.Module) -> bool:
    return bool(getattr(model, "_supports_sdpa", False))


@contextlib.contextmanager
def plain_attention(model: torch.nn.Module, eager: bool = False) -> Iterator[None]:
    """Run `model` on SDPA's math backend (its eager code where it has no SDPA path), then restore it."""
    config = config_of(model)
    previous = config._attn_implementation
    model.set_attn_implementation("sdpa" if has_sdpa_path(model) and not eager else "eager")  # type: ignore[operator]
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        model.set_attn_implementation(previous)  # type: ignore[operator]


def reference_logits(model: torch.nn.Module, sequences: Sequence[Sequence[int]],
                     device: torch.device, eager: bool = False) -> list[torch.Tensor]:
    """Logits of each sequence alone (no padding, no packing), on the host in the model's dtype."""
    references = []
    with without_autograd(model), plain_attention(model, eager):
        for sequence in sequences:
            input_ids = torch.tensor([list(sequence)], dtype=torch.long, device=device)
            references.append(model(input_ids=input_ids).logits[0].cpu())
    return references


def reference_noise_floor(model: torch.nn.Module, sequences: Sequence[Sequence[int]], device: torch.device,
                          references: Sequence[torch.Tensor]) -> float:
    """Largest |logit| difference between the reference and the family's eager code on the same sequences.

    Both are correct one-sequence computations, so what separates them is rounding alone. A mixture of experts'
    eager code also runs its experts as the loop over experts, which adds each expert's output in the dtype
    where the batched implementations sum in fp32: rows of any implementation, and routers picking another
    k-th expert at a near tie, are then judged against the spread of two correct computations. 0.0 where the
    reference already is the eager code.
    """
    default_experts = experts_implementation(model)
    if not has_sdpa_path(model) and default_experts in (None, "eager"):
        return 0.0
    with experts_as(model, "eager"):
        eager = reference_logits(model, sequences, device, eager=True)
    return max(float((a.float() - b.float()).abs().max()) for a, b in zip(eager, references, strict=True))


def references_with_noise(model: torch.nn.Module, sequences: Sequence[Sequence[int]],
                          device: torch.device) -> tuple[tuple[torch.Tensor, ...], float]:
    """The gate's one-at-a-time references of `sequences` and their noise floor (see reference_noise_floor)."""
    references = tuple(reference_logits(model, sequences, device))
    return references, reference_noise_floor(model, sequences, device, references)


def logits_by_sequence(batch: Batch, logits: torch.Tensor) -> dict[int, torch.Tensor]:
    """Each sequence's logits at its real positions, keyed by the batch's sequence ids.

    Offsets come from the host-side lengths, so nothing is read back from the device to find them.
    """
    if isinstance(batch, PackedBatch):
        flat = logits.reshape(-1, logits.shape[-1])
        pieces, start = {}, 0
        for sequence_id, length in zip(batch.sequence_ids, batch.lengths, strict=True):
            pieces[sequence_id] = flat[start:start + length]
            start += length
        return pieces
    return {sequence_id: logits[row, :length]
            for row, (sequence_id, length) in enumerate(zip(batch.sequence_ids, batch.lengths, strict=True))}


def compare(candidates: Mapping[int, torch.Tensor], references: Sequence[torch.Tensor],
            dtype: Dtype, noise_floor: float = 0.0) -> GateResult:
    scale = max(float(reference.float().abs().max()) for reference in references)
    tolerance = max(RELATIVE_TOLERANCE[dtype] * scale, NOISE_MARGIN * noise_floor)
    missing = [index for index in range(len(references)) if index not in candidates]
    if missing:
        return GateResult(False, None, tolerance, f"the layout lost sample sequences {missing}")
    max_error = 0.0
    for index, reference in enumerate(references):
        candidate = candidates[index].float().cpu()
        if candidate.shape != reference.shape:
            return GateResult(False, None, tolerance,
                              f"sequence {index}: logits of shape {tuple(candidate.shape)}, "
                              f"expected {tuple(reference.shape)}")
        max_error = max(max_error, float((candidate - reference.float()).abs().max()))
    if not max_error <= tolerance:  # also catches NaN
        return GateResult(False, max_error, tolerance,
                          f"logits differ from the one-sequence reference by {max_error:.3g}, "
                          f"above the {dtype} tolerance {tolerance:.3g}")
    return GateResult(True, max_error, tolerance)


def check_layout(forward: BatchLogitsFn, batches: Iterable[Batch], references: Sequence[torch.Tensor],
                 dtype: Dtype, noise_floor: float = 0.0) -> GateResult:
    """Run the prepared sample batches through `forward` and compare every sequence with its reference.

    The batches' sequence ids index `references` (the strategy was given exactly the sample).
    """
    candidates: dict[int, torch.Tensor] = {}
    # no_grad, not inference_mode: the forward may be a sharded model's, whose weights must stay trainable
    with torch.no_grad():
        for batch in batches:
            for sequence_id, logits in logits_by_sequence(batch, forward(batch)).items():
                candidates[sequence_id] = logits.cpu()
    return compare(candidates, references, dtype, noise_floor)
