"""The strategies as step plans: which tokens each step computes, for which slot, and what it produces.

Pure host logic. Output lengths are fixed per request (random weights never stop on their own, so each
request stops at its own length, as a real answer would), so the whole schedule is known without reading a
single token back from the device: the host plans every step ahead of the GPU.

- `static`: requests in arrival order, `slots` at a time; prompts left-padded to the batch's longest and
  prefilled together; the batch then decodes until its longest request ends, finished slots computing on.
- `sorted`: the same after ordering requests by output length, then prompt length (generation's binning).
- `continuous`: a finished request's slot is refilled at the next step: the new prompts are prefilled,
  packed, in the same forward as the running slots' decode tokens; steps with no prefill are pure decode.
  Given token buckets, a step with prefills is padded to its bucket's token count (a trash segment after the
  slots, see `decoding.cache`) and to one output per slot: the fixed shape of the CUDA graph it replays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from padbench.worker.engine.decoding.cache import HostPlan, TokenBuckets


@dataclass(frozen=True)
class Request:
    row: int  # where its tokens are recorded
    prompt: tuple[int, ...]
    output_length: int


@dataclass
class StepRecord:
    """What a step did, for the figures computed once the pass is timed."""

    kind: str  # "prefill", "mixed" (prefills beside decodes) or "decode"
    admitted: list[int] = field(default_factory=list)  # request rows whose prefill (and first token) it ran
    decoded: list[int] = field(default_factory=list)  # request rows given a decode token they asked for
    decode_slots: int = 0  # decode tokens computed (finished and empty slots included)
    prompt_tokens: int = 0
    pad_tokens: int = 0
    bucketed: bool = False  # padded to a token bucket (it replays that bucket's CUDA graph)
    bucket_pad_tokens: int = 0  # computed to fill the step to its bucket's token count (work, not output)
    kv_read_tokens: int = 0  # keys each decode token attends to, summed (what a decode step reads)

    @property
    def useful_decodes(self) -> int:
        """Decode tokens some request asked for."""
        return len(self.decoded)


@dataclass
class _Slot:
    request: Request | None = None
    pad: int = 0
    length: int = 0  # cache rows written, pads included
    produced: int = 0

    @property
    def finished(self) -> bool:
        return self.request is None or self.produced >= self.request.output_length


class PlanBuilder:
    """Accumulates one step's tokens slot by slot (slots must be added in increasing order)."""

    def __init__(self, slots: int, capacity: int, trash_row: int, trash_col: int) -> None:
        self.capacity, self.trash_row, self.trash_col = capacity, trash_row, trash_col
        self.tokens: list[int] = []
        self.source: list[int] = []
        self.positions: list[int] = []
        self.writes: list[int] = []
        self.counts = [0] * slots
        self.k_start = [0] * slots
        self.k_used = [0] * slots
        self.logits: list[int] = []
        self.out: list[tuple[int, int, int]] = []  # (slot, row, col)

    def prefill(self, slot: int, prompt: Sequence[int], pad: int, pad_id: int, row: int) -> None:
        base = slot * self.capacity
        length = pad + len(prompt)
        self.tokens += [pad_id] * pad + list(prompt)
        self.source += [slot] * length
        self.positions += [0] * pad + list(range(len(prompt)))
        self.writes += range(base, base + length)
        self.counts[slot], self.k_start[slot], self.k_used[slot] = length, base + pad, len(prompt)
        self.logits.append(len(self.tokens) - 1)
        self.out.append((slot, row, 0))

    def decode(self, slot: int, position: int, write_row: int, k_start: int, k_used: int, row: int, col: int) -> None:
        self.tokens.append(-1)
        self.source.append(slot)
        self.positions.append(position)
        self.writes.append(write_row)
        self.counts[slot], self.k_start[slot], self.k_used[slot] = 1, k_start, k_used
        self.logits.append(len(self.tokens) - 1)
        self.out.append((slot, row, col))

    def idle_decode(self, slot: int) -> None:
        """An empty slot in a fixed-width decode step: it attends to its own scratch row only."""
        scratch = slot * self.capacity + self.capacity - 1
        self.decode(slot, 0, scratch, scratch, 1, self.trash_row, self.trash_col)

    def pad_to(self, tokens: int, scratch_start: int, pad_id: int) -> int:
        """Fills the step to `tokens` tokens with a segment of the trash slot (after the real slots): its keys go
        to scratch rows from `scratch_start` that only it reads, its outputs to the trash. Outputs are filled to
        one per slot, the trash's too. Returns the padding's token count."""
        pads, trash_slot = tokens - len(self.tokens), len(self.counts)
        self.tokens += [pad_id] * pads
        self.source += [trash_slot] * pads
        self.positions += range(pads)
        self.writes += range(scratch_start, scratch_start + pads)
        self.counts.append(pads)
        self.k_start.append(scratch_start)
        self.k_used.append(pads)
        missing = trash_slot - len(self.out)
        self.logits += [tokens - 1] * missing
        self.out += [(trash_slot, self.trash_row, self.trash_col)] * missing
        return pads

    def build(self) -> HostPlan:
        def array(values: Sequence[int]) -> np.ndarray:
            return np.asarray(values, dtype=np.int64)

        out = np.asarray(self.out, dtype=np.int64).reshape(-1, 3)
        return HostPlan(tokens=array(self.tokens), source_slot=array(self.source), positions=array(self.positions),
                        write_index=array(self.writes), query_counts=array(self.counts), k_start=array(self.k_start),
                        k_used=array(self.k_used), logit_rows=array(self.logits), out_slot=out[:, 0],
                        out_row=out[:, 1], out_col=out[:, 2])


class Scheduler:
    """Plans the steps of one pass over `requests` with `slots` sequences decoding at once."""

    def __init__(self, slots: int, capacity: int, pad_id: int, trash_row: int, trash_col: int,
                 buckets: TokenBuckets | None = None) -> None:
        self.slots, self.capacity, self.pad_id = slots, capacity, pad_id
        self.trash_row, self.trash_col, self.buckets = trash_row, trash_col, buckets
        self.state = [_Slot() for _ in range(slots)]

    def _builder(self) -> PlanBuilder:
        return PlanBuilder(self.slots, self.capacity, self.trash_row, self.trash_col)

    def _admit(self, builder: PlanBuilder, record: StepRecord, slot: int, request: Request, pad: int) -> None:
        self.state[slot] = _Slot(request, pad, pad + len(request.prompt), 1)
        builder.prefill(slot, request.prompt, pad, self.pad_id, request.row)
        record.admitted.append(request.row)
        record.prompt_tokens += len(request.prompt)
        record.pad_tokens += pad

    def _decode(self, builder: PlanBuilder, record: StepRecord, slot: int) -> None:
        state = self.state[slot]
        if state.request is None:
            builder.idle_decode(slot)
            record.decode_slots += 1
            record.kv_read_tokens += 1
            return
        base = slot * self.capacity
        useful = state.produced < state.request.output_length
        col, row = (state.produced, state.request.row) if useful else (self.trash_col, self.trash_row)
        k_used = state.length - state.pad + 1
        builder.decode(slot, state.length - state.pad, base + state.length, base + state.pad, k_used, row, col)
        state.length += 1
        state.produced += 1
        record.decode_slots += 1
        if useful:
            record.decoded.append(row)
        record.kv_read_tokens += k_used

    def batch(self, requests: Sequence[Request]) -> Iterator[tuple[HostPlan, StepRecord]]:
        """A static batch: left-padded prefill, then decode until the longest output is complete."""
        if len(requests) > self.slots:
            raise ValueError(f"a batch of {len(requests)} requests exceeds {self.slots} slots")
        self.state = [_Slot() for _ in range(self.slots)]
        width = max(len(request.prompt) for request in requests)
        builder, record = self._builder(), StepRecord("prefill")
        for slot, request in enumerate(requests):
            self._admit(builder, record, slot, request, width - len(request.prompt))
        yield builder.build(), record
        for _ in range(max(request.output_length for request in requests) - 1):
            builder, record = self._builder(), StepRecord("decode")
            for slot in range(self.slots):
                self._decode(builder, record, slot)
            yield builder.build(), record
        self.state = [_Slot() for _ in range(self.slots)]

    def continuous(self, requests: Sequence[Request]) -> Iterator[tuple[HostPlan, StepRecord]]:
        queue = list(reversed(requests))
        self.state = [_Slot() for _ in range(self.slots)]
        while queue or not all(state.finished for state in self.state):
            free = {slot for slot, state in enumerate(self.state) if state.finished}
            refill = bool(queue and free)
            running = len(free) < self.slots
            builder = self._builder()
            record = StepRecord(("mixed" if running else "prefill") if refill else "decode")
            for slot in range(self.slots):
                if slot in free and queue and refill:
                    self._admit(builder, record, slot, queue.pop(), 0)
                elif not self.state[slot].finished or not refill:
                    # A pure decode step has every slot's token (a fixed shape for a CUDA graph); in a step with
                    # prefills (its token count varies anyway) empty slots sit it out.
                    if self.state[slot].finished:
                        self.state[slot] = _Slot()
                    self._decode(builder, record, slot)
            if refill:
                self._pad_to_bucket(builder, record)
            yield builder.build(), record
        self.state = [_Slot() for _ in range(self.slots)]

    def _pad_to_bucket(self, builder: PlanBuilder, record: StepRecord) -> None:
        size = self.buckets.fit(len(builder.tokens)) if self.buckets else None
        if size is not None:
            record.bucketed = True
            record.bucket_pad_tokens = builder.pad_to(size, self.slots * self.capacity, self.pad_id)


def sorted_order(requests: Sequence[Request]) -> list[Request]:
    """Requests grouped by output length, then prompt length, so that a batch's slots finish together."""
    return sorted(requests, key=lambda request: (request.output_length, len(request.prompt), request.row))


def static_batches(requests: Sequence[Request], slots: int) -> list[list[Request]]:
    return [list(requests[start:start + slots]) for start in range(0, len(requests), slots)]
