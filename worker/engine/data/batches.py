"""The two batch layouts every strategy produces, and the strategy plugin interface.

Batches are built on the CPU, then moved to the device *before* timing. Everything the forward pass
needs on the host (`max_seqlen` as a Python int, `cu_seqlens` precomputed) is computed here once per
batch, so the model never syncs the device to find it: reading a length back from a device tensor would
stall the host until the GPU caught up, on every forward.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch

from padbench.contract.registry import Registry
from padbench.contract.spec import StrategySpec


@dataclass(frozen=True)
class PaddedBatch:
    """Rows of right-padded sequences: input_ids and attention_mask are (rows, width)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor  # 1 for real tokens, 0 for padding
    lengths: tuple[int, ...]  # real length of each row, host-side
    sequence_ids: tuple[int, ...]  # index of each row's sequence in the dataset, for the correctness gate
    extras: dict[str, object] = field(default_factory=dict)  # per-kernel precomputed inputs (e.g. masks)

    @property
    def real_tokens(self) -> int:
        return sum(self.lengths)

    @property
    def computed_tokens(self) -> int:
        return self.input_ids.numel()

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0]

    @property
    def width(self) -> int:
        return self.input_ids.shape[1]

    @property
    def shape_key(self) -> tuple[int, ...]:
        """What a kernel that compiles per input shape compiles for."""
        return tuple(self.input_ids.shape)

    def to(self, device: torch.device) -> PaddedBatch:
        return replace(self, input_ids=self.input_ids.to(device, non_blocking=True),
                       attention_mask=self.attention_mask.to(device, non_blocking=True),
                       extras=_extras_to(self.extras, device))


@dataclass(frozen=True)
class PackedBatch:
    """Sequences concatenated into one row: input_ids and position_ids are (1, total_tokens).

    position_ids restart at 0 for every sequence; cu_seqlens (int32, n+1) marks the boundaries.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    lengths: tuple[int, ...]
    sequence_ids: tuple[int, ...]
    token_budget: int  # the pack's capacity (batch_size × max_length)
    extras: dict[str, object] = field(default_factory=dict)  # per-kernel precomputed inputs (e.g. masks)

    @property
    def real_tokens(self) -> int:
        return sum(self.lengths)

    @property
    def computed_tokens(self) -> int:
        return self.input_ids.shape[-1]

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def shape_key(self) -> tuple[int, ...]:
        """What a kernel that compiles per input shape compiles for (the boundaries' count and longest
        sequence included, since a varlen kernel may specialise on them)."""
        return self.computed_tokens, self.rows, self.max_seqlen

    def to(self, device: torch.device) -> PackedBatch:
        return replace(self, input_ids=self.input_ids.to(device, non_blocking=True),
                       position_ids=self.position_ids.to(device, non_blocking=True),
                       cu_seqlens=self.cu_seqlens.to(device, non_blocking=True),
                       extras=_extras_to(self.extras, device))


def _extras_to(extras: dict[str, object], device: torch.device) -> dict[str, object]:
    return {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in extras.items()}


Batch = PaddedBatch | PackedBatch


def first_of_each_shape(batches: Sequence[Batch]) -> list[int]:
    """The index of the first batch of every distinct shape: what the warm-up of a kernel that compiles per
    shape must run so that no compilation lands in the timing — one batch per shape, not every batch."""
    first: dict[tuple[int, ...], int] = {}
    for index, batch in enumerate(batches):
        first.setdefault(batch.shape_key, index)
    return list(first.values())


def extreme_batches(batches: Sequence[Batch]) -> list[int]:
    """The indices of the batch with the fewest computed tokens and of the one with the most."""
    if not batches:
        return []
    sizes = [batch.computed_tokens for batch in batches]
    return list(dict.fromkeys([sizes.index(min(sizes)), sizes.index(max(sizes))]))


class Strategy(Protocol):
    """Turns the job's sequences into batches. Every strategy sees the same multiset of sequences."""

    @property
    def layout(self) -> type[PaddedBatch] | type[PackedBatch]: ...

    @property
    def crosses_documents(self) -> bool:
        """True where a row's attention spans several sequences, so a token sees earlier documents."""
        ...

    def gate_units(self, sequences: Sequence[Sequence[int]], max_length: int, seed: int) -> Sequence[Sequence[int]]:
        """What the correctness gate runs alone as its reference, indexed by the batches' `sequence_ids`: the
        sequences themselves, unless the layout's rows are something else (a `wrapped` row)."""
        ...

    def batches(self, sequences: Sequence[Sequence[int]], spec: StrategySpec, batch_size: int,
                max_length: int, pad_token_id: int, seed: int) -> Iterator[Batch]: ...


def longest_attention_span(strategy: Strategy, lengths: Sequence[int], max_length: int) -> int:
    """The most positions one query may attend to: the longest sequence, or, where a layout's rows span
    documents, a whole row of up to max_length tokens however short each document is."""
    if strategy.crosses_documents:
        return min(max_length, sum(lengths))
    return max(lengths)


class PerSequence:
    """The facts of a strategy whose every row or segment is one whole sequence, attending to itself alone."""

    crosses_documents = False

    def gate_units(self, sequences: Sequence[Sequence[int]], max_length: int, seed: int) -> Sequence[Sequence[int]]:
        return sequences


STRATEGIES: Registry[Strategy] = Registry("strategy")
