"""`dynamic`: shuffled rows, each batch padded only to its own longest row (rounded up to `pad_to_multiple_of`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, PaddedBatch, PerSequence
from padbench.worker.engine.strategies.collate import (
    check_sequences,
    in_batches,
    padded_batch,
    padded_width,
    shuffled_order,
)


class DynamicPadding(PerSequence):
    layout = PaddedBatch

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        lengths = check_sequences(sequences, max_length)
        for chosen in in_batches(shuffled_order(len(sequences), seed), batch_size):
            yield padded_batch(sequences, chosen, padded_width(int(lengths[chosen].max()), spec.pad_to_multiple_of),
                               pad_token_id)


STRATEGIES.add("dynamic", DynamicPadding())
