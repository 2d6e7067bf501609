"""A generate job's requests: prompts from the data source, output lengths from the spec or the data."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, cycle, islice

import numpy as np

from padbench.contract.spec import DataSpec
from padbench.kinds.generate.contract import GenerateJobSpec, LengthsFromField, UniformLengths
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.jobs.generate.schedule import Request
from padbench.worker.runtime.progress import ProgressFn

# Draws of output lengths use their own stream, so changing them never changes which prompts are drawn.
OUTPUT_LENGTH_STREAM = 1


def load_requests(spec: GenerateJobSpec, data: DataSpec, vocab_size: int,
                  progress: ProgressFn) -> tuple[list[Request], str, int]:
    """The requests, the data's digest and the pad id."""
    prompts = load_sequences(data, vocab_size, progress=progress)
    if not prompts.sequences:
        raise ValueError(f"data.source {data.source!r}: no prompts")
    lengths = output_lengths(spec, data, vocab_size, prompts.num_lines, progress)
    requests = [Request(row, tuple(prompt), length)
                for row, (prompt, length) in enumerate(zip(prompts.sequences, lengths, strict=True))]
    return requests, prompts.digest, prompts.pad_token_id


def output_lengths(spec: GenerateJobSpec, data: DataSpec, vocab_size: int, prompt_lines: int,
                   progress: ProgressFn) -> list[int]:
    chosen, count = spec.output_length, data.num_samples
    if isinstance(chosen, int):
        return [chosen] * count
    if isinstance(chosen, UniformLengths):
        rng = np.random.default_rng([data.seed, OUTPUT_LENGTH_STREAM])
        low, high = chosen.uniform
        return [int(n) for n in rng.integers(low, high + 1, size=count)]
    return answer_lengths(chosen, data, vocab_size, prompt_lines, progress)


def answer_lengths(chosen: LengthsFromField, data: DataSpec, vocab_size: int, prompt_lines: int,
                   progress: ProgressFn) -> list[int]:
    """Token counts of each drawn record's answer field: the same draw as the prompts (same seed and count),
    read from the other field, so a prompt and its answer come from one record.

    A record with an empty prompt or answer is dropped from one field's lines but not the other's, which
    would pair prompts with other records' answers: such data is refused rather than misaligned.
    """
    answers = load_sequences(data.model_copy(update={"text_field": chosen.field, "max_length": chosen.max_tokens}),
                             vocab_size, progress=progress)
    if answers.num_lines != prompt_lines:
        raise ValueError(f"output_length.field {chosen.field!r}: {answers.num_lines} records have a non-empty "
                         f"answer but {prompt_lines} a non-empty {data.text_field!r}; every record needs both")
    return [max(1, len(answer)) for answer in answers.sequences]


def context_requests(requests: Sequence[Request], context: int, count: int) -> list[Request]:
    """`count` requests whose prompts are exactly `context` tokens of the data's prompts, run together."""
    stream = cycle(chain.from_iterable(request.prompt for request in requests))
    return [Request(row, tuple(islice(stream, context)), requests[row % len(requests)].output_length)
            for row in range(count)]
