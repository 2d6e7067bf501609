"""First-Fit-Decreasing bin packing, run over windows of a shuffled stream rather than the whole corpus.

FFD over the whole corpus places every long sequence first, so the late packs hold only short sequences:
packs stop being samples of the data, and since attention cost grows with Σ lenᵢ²,
the per-pack cost drifts through the run. FFD over a window of a few packs' worth of the shuffled stream
keeps each pack a random mix of lengths while still giving FFD enough small sequences to fill the gaps.
The least-filled pack of each window (FFD's leftovers) is carried into the next window instead of being
emitted half empty; only the final window emits everything, so each sequence is packed exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

# Packs' worth of tokens per window: large enough that FFD fills packs to ~99 % on WikiText lengths,
# small enough that consecutive packs come from different parts of the shuffled stream.
WINDOW_PACKS = 8


def first_fit_decreasing(items: Sequence[int], lengths: np.ndarray, capacity: int) -> list[list[int]]:
    """Packs (lists of item indices): items taken longest first, each into the first pack with room."""
    packs: list[list[int]] = []
    room: list[int] = []
    for item in sorted(items, key=lambda index: -int(lengths[index])):
        size = int(lengths[item])
        if size > capacity:
            raise ValueError(f"sequence {item} has {size} tokens, more than a pack's capacity of {capacity}")
        target = next((pack for pack, free in enumerate(room) if free >= size), len(packs))
        if target == len(packs):
            packs.append([])
            room.append(capacity)
        packs[target].append(item)
        room[target] -= size
    return packs


def windowed_ffd(order: np.ndarray, lengths: np.ndarray, capacity: int,
                 window_packs: int = WINDOW_PACKS) -> Iterator[list[int]]:
    """Packs of the items in `order` (a shuffled stream), FFD over successive windows of the stream."""
    carried: list[int] = []
    position = 0
    while position < len(order) or carried:
        window, tokens = list(carried), int(lengths[carried].sum())
        while position < len(order) and tokens < window_packs * capacity:
            window.append(int(order[position]))
            tokens += int(lengths[order[position]])
            position += 1
        packs = first_fit_decreasing(window, lengths, capacity)
        carried = []
        if position < len(order) and len(packs) > 1:
            carried = packs.pop(min(range(len(packs)), key=lambda i: int(lengths[packs[i]].sum())))
        yield from packs
