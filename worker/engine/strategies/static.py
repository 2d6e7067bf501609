"""`static`: shuffled rows, every one padded to max_length — the baseline that wastes the most compute."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, PaddedBatch, PerSequence
from padbench.worker.engine.strategies.collate import check_sequences, in_batches, padded_batch, shuffled_order


class StaticPadding(PerSequence):
    layout = PaddedBatch

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        check_sequences(sequences, max_length)
        for chosen in in_batches(shuffled_order(len(sequences), seed), batch_size):
            yield padded_batch(sequences, chosen, spec.widest(max_length), pad_token_id)


STRATEGIES.add("static", StaticPadding())
