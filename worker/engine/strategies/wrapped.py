"""`wrapped`: every sequence concatenated into one stream, cut into rows of exactly max_length tokens.

This is TRL's `packing_strategy="wrapped"` (`trl.pack_dataset`): the tokenized examples are joined end to end
and split every max_length tokens, with no position ids, so each row's positions run 0..max_length-1 and its
causal attention runs across the documents it holds — nothing resets at a boundary, and a document cut by a
row's end continues in the next row without the tokens before the cut. TRL's packing adds no separator
itself: its trainer appends the tokenizer's end-of-sequence token to each text before tokenizing. Here the
sequences are packed as the job's tokenizer produced them (a BERT-style tokenizer ends each with its [SEP]),
so every layout of a job computes on the same tokens and counts the same real tokens.
https://huggingface.co/docs/trl/sft_trainer#packing

It computes another function than the per-sequence layouts (a token sees earlier documents), so the gate
compares each row with that row run alone as one sequence, and results mark the row. Every row is full
except the stream's last, the only padding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from padbench.contract.spec import StrategySpec
from padbench.worker.engine.data.batches import STRATEGIES, PaddedBatch
from padbench.worker.engine.strategies.collate import check_sequences, in_batches, padded_batch, shuffled_order


def wrapped_rows(sequences: Sequence[Sequence[int]], max_length: int, seed: int) -> list[list[int]]:
    """The sequences in shuffled order, concatenated and cut every max_length tokens (the last row shorter)."""
    check_sequences(sequences, max_length)
    order = shuffled_order(len(sequences), seed)
    stream = np.concatenate([np.asarray(sequences[index], dtype=np.int64) for index in order])
    return [stream[start:start + max_length].tolist() for start in range(0, len(stream), max_length)]


class WrappedRows:
    layout = PaddedBatch
    crosses_documents = True

    def gate_units(self, sequences: Sequence[Sequence[int]], max_length: int, seed: int) -> Sequence[Sequence[int]]:
        return wrapped_rows(sequences, max_length, seed)

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[PaddedBatch]:
        rows = wrapped_rows(sequences, max_length, seed)
        # A batch's rows are consecutive pieces of the stream; `sequence_ids` number the rows, not documents.
        for chosen in in_batches(np.arange(len(rows)), batch_size):
            yield padded_batch(rows, chosen, max_length, pad_token_id)


STRATEGIES.add("wrapped", WrappedRows())
