"""Named length distributions: the fitted WikiText/BERT table matches the corpus it was measured on."""

from __future__ import annotations

import numpy as np
import pytest

from padbench.worker.engine.data.synthetic import (
    WIKITEXT103_BERT_QUANTILES,
    DistributionError,
    fit_quantile_table,
    get_distribution,
)

# The corpus figures (all 5,982 non-empty lines of the WikiText-2 files the table was fitted on, under
# bert-base-uncased), as scripts/fit_lengths.py prints them; tests/fixtures holds the lengths themselves.
CORPUS_MEAN, CORPUS_MEDIAN, CORPUS_P90, CORPUS_P99, CORPUS_MAX = 97.23, 82, 225.9, 357.19, 525


def sample(name: str, count: int = 50_000, max_length: int = 640, seed: int = 0) -> np.ndarray:
    return get_distribution(name).sample(np.random.default_rng(seed), count, max_length)


def test_the_table_in_the_code_is_what_the_corpus_gives(wikitext_lengths: np.ndarray) -> None:
    lengths = wikitext_lengths.tolist()
    assert len(lengths) == 5982 and np.mean(lengths) == pytest.approx(CORPUS_MEAN, abs=0.005)
    assert max(lengths) == CORPUS_MAX and np.median(lengths) == CORPUS_MEDIAN
    assert fit_quantile_table(lengths, len(WIKITEXT103_BERT_QUANTILES)) == WIKITEXT103_BERT_QUANTILES


def test_wikitext_samples_have_the_corpus_statistics() -> None:
    lengths = sample("wikitext103-bert")
    p90, p99 = np.percentile(lengths, [90, 99])
    assert lengths.mean() == pytest.approx(CORPUS_MEAN, rel=0.02)
    assert abs(np.median(lengths) - CORPUS_MEDIAN) <= 3
    assert p90 == pytest.approx(CORPUS_P90, rel=0.03)
    assert p99 == pytest.approx(CORPUS_P99, rel=0.05)
    assert lengths.min() >= 3 and lengths.max() <= CORPUS_MAX
    assert lengths.dtype == np.int64


def test_samples_are_seeded() -> None:
    assert np.array_equal(sample("wikitext103-bert", 100, seed=5), sample("wikitext103-bert", 100, seed=5))
    assert not np.array_equal(sample("wikitext103-bert", 100, seed=5), sample("wikitext103-bert", 100, seed=6))


def test_uniform_and_fixed() -> None:
    uniform = sample("uniform:10:20", 5000)
    assert uniform.min() == 10 and uniform.max() == 20
    assert len(np.unique(uniform)) == 11
    assert set(sample("fixed:33", 10).tolist()) == {33}


def test_lengths_are_clipped_to_two_and_max_length() -> None:
    assert sample("fixed:900", 5, max_length=640).tolist() == [640] * 5
    assert sample("uniform:1:1", 5).tolist() == [2] * 5
    assert sample("wikitext103-bert", 2000, max_length=64).max() == 64


@pytest.mark.parametrize(("name", "reason"), [
    ("zipf", "unknown length distribution 'zipf'"),
    ("uniform:10", "uniform:LO:HI"),
    ("uniform:20:10", "must not exceed"),
    ("uniform:a:b", "whole numbers"),
    ("fixed:0", "at least 1"),
    ("wikitext103-bert:3", "takes no parameters"),
])
def test_bad_names_say_what_is_wrong(name: str, reason: str) -> None:
    with pytest.raises(DistributionError, match=reason):
        get_distribution(name)
