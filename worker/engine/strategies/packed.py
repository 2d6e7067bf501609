"""`packed`: sequences concatenated into packs of batch_size × max_length tokens, no padding at all.

Each pack carries position ids that restart at 0 per sequence, int32 `cu_seqlens` and the longest
segment as a Python int, all computed here on the host so varlen kernels never sync to find them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, PackedBatch, PerSequence
from padbench.worker.engine.strategies.collate import check_sequences, packed_batch, shuffled_order
from padbench.worker.engine.strategies.packing import windowed_ffd


class PackedSequences(PerSequence):
    layout = PackedBatch

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PackedBatch]:
        lengths = check_sequences(sequences, max_length)
        budget = batch_size * max_length
        for chosen in windowed_ffd(shuffled_order(len(sequences), seed), lengths, budget):
            yield packed_batch(sequences, chosen, budget)


STRATEGIES.add("packed", PackedSequences())
