"""The correctness gate of a generate row: its greedy tokens against one request at a time, before timing.

The reference generates each gate request alone, recomputing the whole sequence at every step with the
model's plain attention (no cache, no batch, no padding). A strategy passes when, for every request:
- its first step's logits are within the dtype's tolerance of the reference's, and
- its tokens equal the reference's up to the first step where the reference's two best logits are closer
  than twice that tolerance (each may move by the tolerance, in opposite directions): in fp32 that is every
  token; in bf16 rounding may legitimately pick either of two such tokens, after which the continuations
  differ.
A slot mix-up, a wrong position or a stale cache row changes tokens long before any tie, and fails the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from padbench.worker.engine.measure.correctness import RELATIVE_TOLERANCE, gate_sample, plain_attention
from padbench.worker.jobs.generate.schedule import Request

# Two logits within the tolerance of their references can swap order when they are this many tolerances apart.
TIE_FACTOR = 2.0


@dataclass(frozen=True)
class ReferenceRun:
    tokens: list[int]
    first_logits: torch.Tensor  # on the host, float32
    comparable: int  # tokens to compare: up to the first near-tie


@dataclass(frozen=True)
class GateOutcome:
    passed: bool
    detail: str
    max_error: float | None
    tolerance: float


def gate_requests(requests: Sequence[Request], count: int, tokens: int) -> list[Request]:
    """Requests spread over the prompt lengths (shortest and longest included), each cut to `tokens` outputs."""
    chosen = gate_sample([len(request.prompt) for request in requests], count)
    return [Request(row, requests[index].prompt, min(requests[index].output_length, tokens))
            for row, index in enumerate(chosen)]


def reference_runs(model: torch.nn.Module, requests: Sequence[Request], device: torch.device,
                   dtype: str) -> dict[int, ReferenceRun]:
    runs = {}
    with torch.inference_mode(), plain_attention(model):
        for request in requests:
            sequence, tokens, first, comparable = list(request.prompt), [], None, None
            for step in range(request.output_length):
                logits = model(input_ids=torch.tensor([sequence], device=device)).logits[0, -1].float().cpu()
                first = logits if first is None else first
                top = torch.topk(logits, 2).values
                if comparable is None and float(top[0] - top[1]) <= TIE_FACTOR * tolerance_of(first, dtype):
                    comparable = step  # this step's token may go either way, and so the ones after it
                tokens.append(int(logits.argmax()))
                sequence.append(tokens[-1])
            runs[request.row] = ReferenceRun(tokens, first if first is not None else torch.zeros(0),
                                             comparable if comparable is not None else len(tokens))
    return runs


def tolerance_of(first_logits: torch.Tensor, dtype: str) -> float:
    return RELATIVE_TOLERANCE[dtype] * float(first_logits.abs().max())


def judge(requests: Sequence[Request], references: dict[int, ReferenceRun], generated: torch.Tensor,
          first_logits: dict[int, torch.Tensor], dtype: str) -> GateOutcome:
    table = generated.cpu()
    worst, tolerance, compared = 0.0, 0.0, 0
    for request in requests:
        reference = references[request.row]
        tolerance = max(tolerance, tolerance_of(reference.first_logits, dtype))
        logits = first_logits.get(request.row)
        if logits is None:
            return GateOutcome(False, f"gate request {request.row}: no first-step logits were produced", None,
                               tolerance)
        error = float((logits - reference.first_logits).abs().max())
        worst = max(worst, error)
        if error > tolerance_of(reference.first_logits, dtype):
            return GateOutcome(False, f"gate request {request.row}: first-step logits differ from the one-at-a-time "
                                      f"reference by {error:.4g} (tolerance {tolerance:.4g})", worst, tolerance)
        ours = table[request.row, :reference.comparable].tolist()
        theirs = reference.tokens[:reference.comparable]
        if ours != theirs:
            step = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
            return GateOutcome(False, f"gate request {request.row}: output token {step} is {ours[step]}, the "
                                      f"one-at-a-time reference's is {theirs[step]}", worst, tolerance)
        compared += reference.comparable
    total = sum(request.output_length for request in requests)
    return GateOutcome(True, f"{len(requests)} requests: {compared} of {total} output tokens compared (up to the "
                             "first near-tie) equal the one-at-a-time reference", worst, tolerance)
