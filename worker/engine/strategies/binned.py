"""`binned`: batches drawn from one bin of similar **token** lengths, each padded to its own longest row.

Edges are quantiles (equal counts per bin), not equal widths. Token lengths are long-tailed (WikiText under
BERT: 90 % of lines below 226 tokens, the longest 525), so equal-width edges would put most sequences in
the first two bins, which stay wide and padded, while the tail bins hold a handful of sequences each.
Equal-count bins are narrow where the data is dense, which is where padding is saved.

Bin boundaries are also aligned to whole batches, so every batch has batch_size rows except the last one,
exactly as in static and dynamic: binned is measured at the same batch size as the other layouts, not on
a swarm of small leftover batches. (The original padding benchmark, github.com/handdl/efficient-batching,
measured binned on much smaller batches than the other layouts, so its binned figure compared a different
regime.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise

import numpy as np

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, PaddedBatch, PerSequence
from padbench.worker.engine.strategies.collate import (
    check_sequences,
    in_batches,
    padded_batch,
    padded_width,
)
from padbench.worker.engine.strategies.tiers import Tiers, tier_of


def length_bins(lengths: np.ndarray, n_bins: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Sequence indices split into at most n_bins groups of increasing token length, each of whole batches.

    Sorting a random permutation stably breaks ties between equal lengths at random, so which of two
    equal-length sequences lands on either side of a boundary does not depend on its position in the data.
    """
    permuted = rng.permutation(len(lengths))
    by_length = permuted[np.argsort(lengths[permuted], kind="stable")]
    total_batches = -(-len(lengths) // batch_size)
    batch_boundaries = np.linspace(0, total_batches, min(n_bins, total_batches) + 1).round().astype(int)
    row_boundaries = np.minimum(batch_boundaries * batch_size, len(lengths))
    return [by_length[start:stop] for start, stop in pairwise(row_boundaries)]


def binned_batches(lengths: np.ndarray, members: np.ndarray, n_bins: int, batch_size: int,
                   rng: np.random.Generator) -> list[np.ndarray]:
    """The members' batches: bins of similar length, each of whole batches of members in random order."""
    return [chosen for group in length_bins(lengths[members], n_bins, batch_size, rng)
            for chosen in in_batches(rng.permutation(members[group]), batch_size)]


class BinnedPadding(PerSequence):
    layout = PaddedBatch

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        return self.tiered_batches(sequences, spec, [(max_length, batch_size)], max_length, pad_token_id, seed)

    def tiered_batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, tiers: Tiers,
                       max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        """Each length tier binned at its own batch size (`batch_size: auto:N`), its share of the bins."""
        lengths = check_sequences(sequences, max_length)
        if spec.n_bins is None:
            raise ValueError("the binned strategy needs n_bins")
        rng = np.random.default_rng(seed)
        tier = tier_of(lengths, tiers)
        batches = []
        for number, (_, batch_size) in enumerate(tiers):
            members = np.flatnonzero(tier == number)
            if members.size:
                n_bins = max(1, round(spec.n_bins * members.size / len(lengths)))
                batches += binned_batches(lengths, members, n_bins, batch_size, rng)
        # Bins are visited in random batch order, so the run does not sweep from short to long sequences.
        for position in rng.permutation(len(batches)):
            chosen = batches[position]
            yield padded_batch(sequences, chosen, padded_width(int(lengths[chosen].max()), spec.pad_to_multiple_of),
                               pad_token_id)


STRATEGIES.add("binned", BinnedPadding())
