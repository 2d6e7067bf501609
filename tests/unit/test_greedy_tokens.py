"""The decoder's two-stage greedy choice picks exactly what `argmax` picks, ties and padding included."""

from __future__ import annotations

import pytest
import torch

from padbench.worker.engine.decoding.decoder import ARGMAX_CHUNKS, greedy_tokens


@pytest.mark.parametrize("vocab", [151_936, 50_257, 32_000, ARGMAX_CHUNKS * 64 * ARGMAX_CHUNKS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matches_argmax_on_random_logits(vocab: int, dtype: torch.dtype) -> None:
    logits = torch.randn(8, vocab, generator=torch.Generator().manual_seed(vocab)).to(dtype)
    assert torch.equal(greedy_tokens(logits), logits.argmax(dim=-1))


def test_ties_go_to_the_first_index_across_and_within_chunks() -> None:
    vocab = 151_936
    width = -(-vocab // (ARGMAX_CHUNKS * 64)) * 64
    logits = torch.zeros(3, vocab)
    logits[0, [2 * width + 7, 5 * width + 1]] = 4.0  # the same maximum in two chunks: the earlier chunk's
    logits[1, [3 * width + 9, 3 * width + 2]] = 4.0  # twice in one chunk: the earlier position
    logits[2, -1] = 4.0  # the vocabulary's last token, in the chunk the padding fills
    assert greedy_tokens(logits).tolist() == [2 * width + 7, 3 * width + 2, vocab - 1]
    assert torch.equal(greedy_tokens(logits), logits.argmax(dim=-1))


def test_rows_of_negative_infinity_pick_the_first_token_as_argmax_does() -> None:
    logits = torch.full((2, 60_000), float("-inf"))
    assert torch.equal(greedy_tokens(logits), logits.argmax(dim=-1))


@pytest.mark.parametrize("chunks", [2, 8, 128])
def test_any_chunk_count_picks_what_argmax_picks(chunks: int) -> None:
    logits = torch.randn(4, 151_936, generator=torch.Generator().manual_seed(chunks))
    assert torch.equal(greedy_tokens(logits, chunks), logits.argmax(dim=-1))


def test_a_small_vocabulary_takes_one_stage() -> None:
    logits = torch.randn(4, 300)
    assert torch.equal(greedy_tokens(logits), logits.argmax(dim=-1))
