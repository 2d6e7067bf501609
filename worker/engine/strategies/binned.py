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
from padbench.worker.engine.batches import STRATEGIES, PaddedBatch, PerSequence
from padbench.worker.engine.strategies.collate import (
    check_sequences,
    in_batches,
    padded_batch,
    padded_width,
)


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


class BinnedPadding(PerSequence):
    layout = PaddedBatch

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        lengths = check_sequences(sequences, max_length)
        if spec.n_bins is None:
            raise ValueError("the binned strategy needs n_bins")
        rng = np.random.default_rng(seed)
        batches = [chosen for members in length_bins(lengths, spec.n_bins, batch_size, rng)
                   for chosen in in_batches(rng.permutation(members), batch_size)]
        # Bins are visited in random batch order, so the run does not sweep from short to long sequences.
        for position in rng.permutation(len(batches)):
            chosen = batches[position]
            yield padded_batch(sequences, chosen, padded_width(int(lengths[chosen].max()), spec.pad_to_multiple_of),
                               pad_token_id)


STRATEGIES.add("binned", BinnedPadding())
