"""The layouts: same sequences for all, padded/packed/wrapped invariants, determinism, efficiency on the corpus."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch

from padbench.contract.spec import DataSpec, StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, Batch, PackedBatch, PaddedBatch
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.engine.model.flops import ModelShape, batch_flops
from padbench.worker.engine.strategies import worst_case_packed, worst_case_padded
from padbench.worker.engine.strategies.worst_case import worst_case_batch

MAX_LENGTH = 128
PAD = 0
SPECS = {
    "static": StrategySpec(name="static"),
    "dynamic": StrategySpec(name="dynamic"),
    "binned": StrategySpec(name="binned", n_bins=4),
    "packed": StrategySpec(name="packed"),
    "wrapped": StrategySpec(name="wrapped"),
}
# The layouts whose every row or segment is one whole sequence (wrapped's rows are pieces of a stream).
PER_SEQUENCE = [name for name in SPECS if not STRATEGIES.get(name).crosses_documents]


@pytest.fixture(scope="module")
def sequences() -> list[list[int]]:
    spec = DataSpec(num_samples=300, max_length=MAX_LENGTH, seed=7, distribution="wikitext103-bert")
    return load_sequences(spec, vocab_size=1000).sequences


def run(name: str, sequences: Sequence[Sequence[int]], batch_size: int = 16, seed: int = 0,
        max_length: int = MAX_LENGTH, spec: StrategySpec | None = None) -> list[Batch]:
    return list(STRATEGIES.get(name).batches(sequences, spec or SPECS[name], batch_size, max_length, PAD, seed))


def rows_of(batch: Batch) -> list[list[int]]:
    """Each sequence's tokens as the batch holds them."""
    if isinstance(batch, PaddedBatch):
        return [batch.input_ids[row, :length].tolist() for row, length in enumerate(batch.lengths)]
    bounds = batch.cu_seqlens.tolist()
    return [batch.input_ids[0, start:stop].tolist() for start, stop in pairwise(bounds)]


def efficiency(batches: list[Batch]) -> float:
    return sum(batch.real_tokens for batch in batches) / sum(batch.computed_tokens for batch in batches)


def test_every_strategy_is_registered_with_its_layout() -> None:
    layouts = {name: STRATEGIES.get(name).layout for name in SPECS}
    assert layouts == {"static": PaddedBatch, "dynamic": PaddedBatch, "binned": PaddedBatch, "packed": PackedBatch,
                       "wrapped": PaddedBatch}
    assert PER_SEQUENCE == ["static", "dynamic", "binned", "packed"]


@pytest.mark.parametrize("name", PER_SEQUENCE)
def test_every_sequence_appears_exactly_once_with_its_own_tokens(name: str, sequences: list[list[int]]) -> None:
    batches = run(name, sequences)
    assert Counter(i for batch in batches for i in batch.sequence_ids) == Counter(range(len(sequences)))
    for batch in batches:
        assert rows_of(batch) == [sequences[i] for i in batch.sequence_ids]


@pytest.mark.parametrize("name", ["static", "dynamic", "binned"])
def test_padded_batches_are_right_padded_and_masked(name: str, sequences: list[list[int]]) -> None:
    batches = run(name, sequences)
    assert sum(batch.rows != 16 for batch in batches) <= 1  # one partial batch at most, binned included
    for batch in batches:
        assert 0 < batch.real_tokens <= batch.rows * MAX_LENGTH
        lengths = torch.tensor(batch.lengths)
        assert torch.equal(batch.attention_mask.sum(dim=1), lengths)
        assert torch.equal(batch.attention_mask, (torch.arange(batch.width) < lengths[:, None]).long())
        assert bool((batch.input_ids[batch.attention_mask == 0] == PAD).all())
        expected_width = MAX_LENGTH if name == "static" else max(batch.lengths)
        assert batch.width == expected_width


def test_packed_batches_carry_restarting_positions_and_boundaries(sequences: list[list[int]]) -> None:
    for batch in run("packed", sequences, batch_size=4):
        assert batch.token_budget == 4 * MAX_LENGTH
        assert 0 < batch.real_tokens == batch.computed_tokens <= batch.token_budget
        assert batch.cu_seqlens.dtype == torch.int32 and batch.cu_seqlens.shape == (batch.rows + 1,)
        assert batch.cu_seqlens.diff().tolist() == list(batch.lengths)
        assert isinstance(batch.max_seqlen, int) and batch.max_seqlen == max(batch.lengths)
        expected = torch.cat([torch.arange(length) for length in batch.lengths])
        assert torch.equal(batch.position_ids[0], expected)
        assert list(batch.lengths) == sorted(batch.lengths, reverse=True)  # FFD order inside the pack


@pytest.mark.parametrize("name", SPECS)
def test_batches_are_deterministic_for_a_seed(name: str, sequences: list[list[int]]) -> None:
    def order(seed: int) -> list[tuple[int, ...]]:
        return [tuple(batch.input_ids[:, 0].tolist()) for batch in run(name, sequences, seed=seed)]

    assert order(1) == order(1)
    assert order(1) != order(2)


def test_wrapped_rows_hold_every_token_once_in_rows_of_exactly_max_length(sequences: list[list[int]]) -> None:
    batches = run("wrapped", sequences, batch_size=4)
    rows = [row for batch in batches for row in rows_of(batch)]
    order = np.random.default_rng(0).permutation(len(sequences))  # the strategies' shuffle for seed 0
    stream = [token for index in order for token in sequences[index]]
    assert [token for row in rows for token in row] == stream  # the stream, cut and nothing else
    assert [len(row) for row in rows[:-1]] == [MAX_LENGTH] * (len(rows) - 1) and 0 < len(rows[-1]) <= MAX_LENGTH
    assert [i for batch in batches for i in batch.sequence_ids] == list(range(len(rows)))  # rows, not documents
    assert all(batch.width == MAX_LENGTH and bool(batch.attention_mask[:-1].all()) for batch in batches)
    # No position ids: each row's positions are 0..max_length-1 (as TRL's wrapped rows have) and one causal
    # span over every document in the row, so only the stream's last row pads.
    assert efficiency(batches[:-1]) == 1.0 and efficiency(batches) < 1.0
    assert STRATEGIES.get("wrapped").gate_units(sequences, MAX_LENGTH, 0) == rows
    # FLOPs count what it computes: every row attends over its whole max_length, whatever documents it holds.
    shape = ModelShape(n_layer=1, attention_width=8, matmul_macs_per_token=0)
    assert batch_flops(shape, batches[0]).attention == shape.attention_flops([MAX_LENGTH] * 4)


@pytest.mark.parametrize("name", ["static", "dynamic", "binned"])
def test_pad_to_multiple_of_rounds_every_batch_width_up(name: str, sequences: list[list[int]]) -> None:
    options = SPECS[name].model_dump() | {"pad_to_multiple_of": 48}
    batches = run(name, sequences, spec=StrategySpec(**options))
    for batch in batches:  # static: every batch max_length (128) wide, rounded up to 144
        longest = MAX_LENGTH if name == "static" else max(batch.lengths)
        assert batch.width == -(-longest // 48) * 48
    assert rows_of(batches[0]) == [sequences[i] for i in batches[0].sequence_ids]


def test_binned_batches_group_similar_token_lengths(sequences: list[list[int]]) -> None:
    binned = run("binned", sequences, spec=StrategySpec(name="binned", n_bins=8))
    assert efficiency(binned) > efficiency(run("dynamic", sequences)) + 0.2


def test_binning_uses_token_length_not_character_length(tmp_path: Path, tokenizer_dir: Path) -> None:
    # Two groups whose character lengths interleave but whose token lengths do not: 'the … the' lines
    # are long in characters and short in tokens, '!!!…' lines the reverse.
    words = [" ".join(["understanding"] * k + ["the"] * (10 - k)) for k in range(10)]  # 12 tokens each
    marks = ["!" * (28 + k) for k in range(0, 60, 6)]  # 30 to 84 tokens, 28 to 82 characters
    assert min(map(len, words)) < max(map(len, marks)) and min(map(len, marks)) < max(map(len, words))
    corpus = tmp_path / "mixed.txt"
    corpus.write_text("\n".join(words + marks) + "\n", encoding="utf-8")
    data = DataSpec(source=str(corpus), tokenizer=str(tokenizer_dir), num_samples=20, with_replacement=False)
    loaded = load_sequences(data, vocab_size=30522, cache_dir=tmp_path / "cache")
    batches = run("binned", loaded.sequences, batch_size=10, spec=StrategySpec(name="binned", n_bins=2))
    groups = sorted(sorted(batch.lengths) for batch in batches)
    assert groups[0] == [12] * 10  # every 12-token line together, whatever its characters
    assert min(groups[1]) == 30


def test_sequences_outside_one_to_max_length_are_refused() -> None:
    with pytest.raises(ValueError, match="sequence 1 has 0 tokens"):
        run("static", [[5, 6], []])
    with pytest.raises(ValueError, match=f"sequence 0 has {MAX_LENGTH + 1} tokens"):
        run("packed", [[5] * (MAX_LENGTH + 1)])


def test_padding_efficiency_on_the_real_corpus(wikitext_lengths: np.ndarray) -> None:
    """Against the corpus's own figures (scripts/fit_lengths.py prints them): static 15.19 %, dynamic with
    random batches of 32 29.96 % (mean of 10 shuffles). Only the lengths matter, so each token is one id.
    """
    corpus = [[1] * int(length) for length in wikitext_lengths]

    def layout(name: str, batch_size: int, spec: StrategySpec | None = None) -> list[Batch]:
        return run(name, corpus, batch_size=batch_size, max_length=640, spec=spec)

    assert efficiency(layout("static", 32)) == pytest.approx(0.1519, abs=0.0005)
    assert 0.29 <= efficiency(layout("dynamic", 32)) <= 0.31
    # The H200 runs in docs/benchmarks.md measured 0.84 for 16 bins at batch 128.
    assert efficiency(layout("binned", 128, StrategySpec(name="binned", n_bins=16))) > 0.8
    assert efficiency(layout("packed", 32)) == 1.0


def test_worst_case_batches_fill_every_slot() -> None:
    padded = worst_case_padded(rows=6, max_length=64, vocab_size=100)
    assert padded.input_ids.shape == (6, 64) and padded.real_tokens == padded.computed_tokens == 6 * 64
    assert int(padded.input_ids.max()) < 100 and bool(padded.attention_mask.all())
    packed = worst_case_packed(budget_tokens=4 * 64 + 10, max_length=64, vocab_size=100)
    assert packed.lengths == (64, 64, 64, 64, 10) and packed.max_seqlen == 64
    assert packed.input_ids.shape == (1, 4 * 64 + 10) and packed.cu_seqlens.tolist() == [0, 64, 128, 192, 256, 266]
    assert packed.position_ids[0, 64].item() == 0 and packed.position_ids[0, 63].item() == 63


def test_a_strategys_worst_case_follows_its_layout() -> None:
    # The OOM probe's size counts rows for padded layouts, max_length rows' worth of tokens for a pack.
    rows = worst_case_batch(STRATEGIES.get("binned").layout, 3, 64, 100)
    pack = worst_case_batch(STRATEGIES.get("packed").layout, 3, 64, 100)
    assert isinstance(rows, PaddedBatch) and rows.input_ids.shape == (3, 64)
    assert isinstance(pack, PackedBatch) and pack.computed_tokens == 3 * 64 and pack.lengths == (64, 64, 64)


def test_only_kernels_that_mask_a_whole_pack_grow_quadratically() -> None:
    from padbench.worker.engine.attention import ATTENTION_KERNELS
    from padbench.worker.jobs.padding.probe.trials import memory_curve

    quadratic = {name for name, kernel in ATTENTION_KERNELS.items() if kernel.quadratic_memory}
    assert quadratic == {"sdpa-block-mask", "eager-block-mask"}
    assert memory_curve("eager-block-mask") == "quadratic" and memory_curve("eager") == "affine"
