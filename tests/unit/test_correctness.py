"""The correctness gate: correct layouts pass, deliberately broken packings are caught.

The model is a plain transformers GPT-2 and the batches are built here by hand, so the gate is tested
independently of the strategies and kernels it guards.
"""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import padbench.worker.engine.strategies  # noqa: F401  (importing registers the strategies)
from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.measure.correctness import (
    RELATIVE_TOLERANCE,
    check_layout,
    gate_sample,
    logits_by_sequence,
    reference_logits,
)

CPU = torch.device("cpu")
LENGTHS = (5, 17, 40, 3, 90, 12)
WRAP_LENGTH = 96  # the wrapped rows' max_length: the 167 tokens make a full row and a shorter last one


def tiny_model(dtype: torch.dtype) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=256, bos_token_id=0,
                        eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(config).to(dtype).eval()
    model.set_attn_implementation("sdpa")
    return model


@pytest.fixture(scope="module")
def sequences() -> list[list[int]]:
    generator = torch.Generator().manual_seed(1)
    return [torch.randint(1, 1000, (n,), generator=generator).tolist() for n in LENGTHS]


def padded(sequences: list[list[int]]) -> PaddedBatch:
    width = max(map(len, sequences))
    ids = torch.zeros(len(sequences), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, :len(sequence)] = torch.tensor(sequence)
        mask[row, :len(sequence)] = 1
    return PaddedBatch(ids, mask, tuple(map(len, sequences)), tuple(range(len(sequences))))


def packed(sequences: list[list[int]], restart_positions: bool = True) -> PackedBatch:
    lengths = tuple(map(len, sequences))
    ids = torch.tensor([[token for sequence in sequences for token in sequence]])
    if restart_positions:
        positions = torch.cat([torch.arange(n) for n in lengths])[None]
    else:  # the bug: positions run on across sequence boundaries
        positions = torch.arange(ids.shape[1])[None]
    boundaries = torch.tensor((0, *lengths)).cumsum(0).to(torch.int32)
    return PackedBatch(ids, positions, boundaries, max(lengths), lengths, tuple(range(len(lengths))),
                       token_budget=ids.shape[1])


def padded_forward(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    assert isinstance(batch, PaddedBatch)
    return model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits


def packed_forward(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """A correct packed kernel: every sequence attends only to itself, at the batch's position ids."""
    assert isinstance(batch, PackedBatch)
    bounds = batch.cu_seqlens.tolist()
    pieces = [model(input_ids=batch.input_ids[:, start:end], position_ids=batch.position_ids[:, start:end]).logits
              for start, end in pairwise(bounds)]
    return torch.cat(pieces, dim=1)


def leaky_packed_forward(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """The bug: one causal pass over the whole pack, so later sequences attend to earlier ones."""
    assert isinstance(batch, PackedBatch)
    return model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                 attention_mask=torch.ones_like(batch.input_ids)).logits


def gate(model: torch.nn.Module, forward, batch: Batch, sequences: list[list[int]], dtype: str):  # type: ignore[no-untyped-def]
    references = reference_logits(model, sequences, CPU)
    return check_layout(lambda b: forward(model, b), [batch], references, dtype)  # type: ignore[arg-type]


@pytest.mark.parametrize(("dtype", "name"), [(torch.float32, "fp32"), (torch.bfloat16, "bf16")])
def test_correct_layouts_pass(sequences: list[list[int]], dtype: torch.dtype, name: str) -> None:
    model = tiny_model(dtype)
    for forward, batch in ((padded_forward, padded(sequences)), (packed_forward, packed(sequences))):
        result = gate(model, forward, batch, sequences, name)
        assert result.passed, result.reason
        assert result.max_error is not None and result.max_error <= result.tolerance
        # the tolerance is the dtype's relative figure times the logit scale
        assert 0 < result.tolerance < RELATIVE_TOLERANCE[name] * 10


@pytest.mark.parametrize(("dtype", "name"), [(torch.float32, "fp32"), (torch.bfloat16, "bf16")])
def test_gate_catches_positions_that_do_not_restart(sequences: list[list[int]], dtype: torch.dtype,
                                                    name: str) -> None:
    model = tiny_model(dtype)
    result = gate(model, packed_forward, packed(sequences, restart_positions=False), sequences, name)
    assert not result.passed
    assert result.max_error is not None and result.max_error > 5 * result.tolerance
    assert result.reason is not None and "above the" in result.reason


@pytest.mark.parametrize(("dtype", "name"), [(torch.float32, "fp32"), (torch.bfloat16, "bf16")])
def test_gate_catches_attention_across_sequences(sequences: list[list[int]], dtype: torch.dtype,
                                                 name: str) -> None:
    model = tiny_model(dtype)
    result = gate(model, leaky_packed_forward, packed(sequences), sequences, name)
    assert not result.passed
    assert result.max_error is not None and result.max_error > 5 * result.tolerance


def test_gate_catches_attending_to_padding(sequences: list[list[int]]) -> None:
    model = tiny_model(torch.float32)
    batch = padded(sequences)
    # Left padding read as right padding: the real tokens no longer sit where the lengths say.
    shifted = PaddedBatch(batch.input_ids.flip(-1), batch.attention_mask.flip(-1), batch.lengths, batch.sequence_ids)
    assert not gate(model, padded_forward, shifted, sequences, "fp32").passed


def test_a_lost_sequence_fails_the_gate(sequences: list[list[int]]) -> None:
    model = tiny_model(torch.float32)
    result = gate(model, padded_forward, padded(sequences[:-1]), sequences, "fp32")
    assert not result.passed and result.reason == f"the layout lost sample sequences [{len(sequences) - 1}]"


def test_reference_restores_the_models_attention(sequences: list[list[int]]) -> None:
    model = tiny_model(torch.float32)
    model.set_attn_implementation("eager")
    reference_logits(model, sequences[:1], CPU)
    assert model.config._attn_implementation == "eager"


def test_packed_logits_are_split_by_host_side_lengths() -> None:
    batch = packed([[1, 2], [3, 4, 5], [6]])
    logits = torch.arange(6.0).reshape(1, 6, 1)
    pieces = logits_by_sequence(batch, logits)
    assert [pieces[i].flatten().tolist() for i in range(3)] == [[0.0, 1.0], [2.0, 3.0, 4.0], [5.0]]


def test_sample_spans_the_length_range() -> None:
    lengths = [50, 3, 640, 17, 17, 200, 90, 1]
    chosen = gate_sample(lengths, 4)
    assert len(chosen) == 4 and 2 in chosen and 7 in chosen  # the longest and the shortest
    assert gate_sample(lengths, 20) == list(range(8))
    assert gate_sample(lengths, 1) == [2]


def wrapped_sample(sequences: list[list[int]]) -> tuple[list[list[int]], list[Batch]]:
    """The wrapped strategy's rows of the sequences (WRAP_LENGTH tokens each) and its batches of two rows."""
    wrapped = STRATEGIES.get("wrapped")
    batches = list(wrapped.batches(sequences, StrategySpec(name="wrapped"), 2, WRAP_LENGTH, 0, 0))
    return [list(unit) for unit in wrapped.gate_units(sequences, WRAP_LENGTH, 0)], batches


def test_wrapped_rows_pass_against_each_row_run_alone(sequences: list[list[int]]) -> None:
    model = tiny_model(torch.float32)
    rows, batches = wrapped_sample(sequences)
    result = check_layout(lambda b: padded_forward(model, b), batches, reference_logits(model, rows, CPU), "fp32")
    assert result.passed, result.reason
    assert [len(row) for row in rows] == [WRAP_LENGTH, sum(LENGTHS) - WRAP_LENGTH]


def test_gate_catches_wrapped_rows_positioned_along_the_stream(sequences: list[list[int]]) -> None:
    model = tiny_model(torch.float32)
    rows, batches = wrapped_sample(sequences)

    def stream_positions(batch: Batch) -> torch.Tensor:  # the bug: positions of the stream, not of the row
        assert isinstance(batch, PaddedBatch)
        first = batch.sequence_ids[0] * WRAP_LENGTH
        positions = first + torch.arange(batch.rows * batch.width).reshape(batch.rows, batch.width)
        return model(input_ids=batch.input_ids, position_ids=positions).logits

    result = check_layout(stream_positions, batches, reference_logits(model, rows, CPU), "fp32")
    assert not result.passed and result.max_error is not None and result.max_error > 5 * result.tolerance
