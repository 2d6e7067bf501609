"""First-Fit-Decreasing over windows of a shuffled stream: capacity, completeness, order and fill."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from padbench.worker.engine.strategies.packing import first_fit_decreasing, windowed_ffd


def random_lengths(count: int, seed: int, longest: int = 640) -> np.ndarray:
    return np.random.default_rng(seed).integers(1, longest + 1, size=count)


def test_ffd_takes_longest_first_into_the_first_pack_with_room() -> None:
    lengths = np.array([2, 6, 4, 5, 3])
    assert first_fit_decreasing(range(5), lengths, capacity=10) == [[1, 2], [3, 4, 0]]


@pytest.mark.parametrize("seed", range(5))
def test_ffd_packs_fit_hold_every_item_once_and_run_longest_first(seed: int) -> None:
    lengths = random_lengths(300, seed)
    packs = first_fit_decreasing(range(300), lengths, capacity=2048)
    assert Counter(item for pack in packs for item in pack) == Counter(range(300))
    for pack in packs:
        assert lengths[pack].sum() <= 2048
        assert list(lengths[pack]) == sorted(lengths[pack], reverse=True)


def test_an_item_larger_than_a_pack_is_refused() -> None:
    with pytest.raises(ValueError, match="more than a pack's capacity of 10"):
        first_fit_decreasing([0], np.array([11]), capacity=10)


@pytest.mark.parametrize(("seed", "capacity"), [(0, 640), (1, 4 * 640), (2, 32 * 640)])
def test_windows_pack_every_item_exactly_once_within_capacity(seed: int, capacity: int) -> None:
    lengths = random_lengths(2000, seed)
    order = np.random.default_rng(seed).permutation(2000)
    packs = list(windowed_ffd(order, lengths, capacity))
    assert Counter(item for pack in packs for item in pack) == Counter(range(2000))
    assert all(lengths[pack].sum() <= capacity for pack in packs)


def test_windows_fill_packs_on_the_real_corpus(wikitext_lengths: np.ndarray) -> None:
    lengths = wikitext_lengths
    capacity = 32 * 640
    order = np.random.default_rng(0).permutation(len(lengths))
    packs = list(windowed_ffd(order, lengths, capacity))
    fills = np.array([lengths[pack].sum() / capacity for pack in packs])
    assert len(packs) == int(np.ceil(lengths.sum() / capacity))  # as few packs as the tokens allow
    assert fills[:-1].min() > 0.99  # only the very last pack may be partly empty


def test_late_packs_are_not_all_short(wikitext_lengths: np.ndarray) -> None:
    """Whole-corpus FFD would leave the short sequences for the last packs, which then stop being samples."""
    lengths = wikitext_lengths
    order = np.random.default_rng(0).permutation(len(lengths))
    packs = list(windowed_ffd(order, lengths, 8 * 640))
    mean_length = [lengths[pack].mean() for pack in packs]
    half = len(packs) // 2
    assert np.mean(mean_length[half:]) == pytest.approx(np.mean(mean_length[:half]), rel=0.25)
    whole_corpus = first_fit_decreasing(order, lengths, 8 * 640)
    assert lengths[whole_corpus[-1]].mean() < 0.25 * lengths.mean()  # the flaw the windows avoid
