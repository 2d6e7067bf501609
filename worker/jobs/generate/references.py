"""Reference rows: transformers' own generation loops on the same requests, timed the same way.

- `transformers-generate`: `model.generate` on the static strategy's batches (arrival order, left-padded,
  greedy), each batch generating its longest request's output length — what a user's batched loop does;
- `transformers-continuous`: transformers' continuous batching manager, every request added with its own
  output length, up to `batch_size` requests at once.

Both run with transformers' SDPA attention where the model has it (its default), else its eager attention,
and with EOS disabled, so every request generates exactly its output length. They are references: never
gated (they are the library itself), never a strategy in the verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import torch
from transformers import GenerationConfig

from padbench.kinds.generate.contract import GenerateRow, ReferenceName
from padbench.worker.engine.measure.correctness import has_sdpa_path
from padbench.worker.engine.measure.spread import repeat_spread
from padbench.worker.engine.measure.timing import clock_for
from padbench.worker.engine.model.build import config_of
from padbench.worker.jobs.generate.schedule import Request, static_batches
from padbench.worker.runtime.memory import track_peak_memory
from padbench.worker.runtime.messages import first_line

FAILURE_LIMIT = 500


def library_attention(model: torch.nn.Module) -> str:
    return "sdpa" if has_sdpa_path(model) else "eager"


def greedy_config(new_tokens: int, pad_id: int) -> GenerationConfig:
    return GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True,
                            pad_token_id=pad_id, eos_token_id=None, bos_token_id=None)


def generate_batch_pass(model: Any, batch: Sequence[Request], pad_id: int, device: torch.device) -> None:
    width = max(len(request.prompt) for request in batch)
    ids = torch.tensor([[pad_id] * (width - len(r.prompt)) + list(r.prompt) for r in batch], device=device)
    mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in batch], device=device)
    new_tokens = max(request.output_length for request in batch)
    model.generate(input_ids=ids, attention_mask=mask, generation_config=greedy_config(new_tokens, pad_id))


def time_generate(model: Any, requests: Sequence[Request], slots: int, pad_id: int, device: torch.device) -> float:
    clock = clock_for(device)
    clock.start()
    for batch in static_batches(requests, slots):
        generate_batch_pass(model, batch, pad_id, device)
        clock.mark()
    return sum(clock.collect())


def time_continuous(model: Any, requests: Sequence[Request], slots: int, pad_id: int, device: torch.device) -> float:
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    fields = {field.name for field in dataclasses.fields(ContinuousBatchingConfig)}
    batching = ContinuousBatchingConfig()
    if "max_requests_per_batch" in fields:  # transformers versions without it size the batch themselves
        batching.max_requests_per_batch = slots
    config = greedy_config(max(request.output_length for request in requests), pad_id)
    config.eos_token_id = -1  # the manager's spelling of "never stop early"
    with model.continuous_batching_context_manager(generation_config=config, continuous_batching_config=batching,
                                                   block=True, timeout=60) as manager:
        started = time.perf_counter()
        for request in requests:
            manager.add_request(list(request.prompt), request_id=str(request.row),
                                max_new_tokens=request.output_length)
        finished: dict[str, int] = {}
        while len(finished) < len(requests):
            result = manager.get_result(timeout=600)
            if result is None:
                raise RuntimeError("transformers' continuous batching returned no result within 600 s")
            if result.error is not None:
                raise RuntimeError(f"transformers' continuous batching failed request {result.request_id}: "
                                   f"{first_line(result.error, 200)}")
            if result.is_finished():
                finished[result.request_id] = len(result.generated_tokens)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - started
    check_lengths(requests, finished)
    return seconds


def check_lengths(requests: Sequence[Request], generated: dict[str, int]) -> None:
    """Every request generated exactly its output length: a shorter answer would inflate the rate."""
    for request in requests:
        count = generated.get(str(request.row))
        if count != request.output_length:
            raise RuntimeError(f"transformers' continuous batching generated {count} tokens for request "
                               f"{request.row}, which asked for {request.output_length}")


TIMERS = {"transformers-generate": time_generate, "transformers-continuous": time_continuous}


def reference_row(name: ReferenceName, model: torch.nn.Module, requests: Sequence[Request], slots: int, pad_id: int,
                  device: torch.device, repeats: int, warmup: int, noise_cv: float) -> GenerateRow:
    attention = library_attention(model)
    row: dict[str, Any] = {"strategy": name, "reference": True, "attention": attention,
                           "kernel": f"transformers-{attention}", "batch_size": slots}
    config = config_of(model)
    previous = config._attn_implementation
    try:
        model.set_attn_implementation(attention)  # type: ignore[operator]
        # The continuous batching manager runs its loop on a thread of its own, where tensors made under this
        # thread's inference mode cannot be updated in place: it brings its own no-grad context instead.
        mode = torch.inference_mode() if name == "transformers-generate" else contextlib.nullcontext()
        with mode, track_peak_memory(device) as memory:
            started = time.perf_counter()
            if warmup:
                TIMERS[name](model, requests[:warmup], slots, pad_id, device)
            warmup_seconds = time.perf_counter() - started
            seconds = [TIMERS[name](model, requests, slots, pad_id, device) for _ in range(repeats)]
    except Exception as error:  # the library's own failure: this row only
        return GenerateRow(**row, status="failed", error=f"{type(error).__name__}: {first_line(error, FAILURE_LIMIT)}")
    finally:
        model.set_attn_implementation(previous)  # type: ignore[operator]
    output = sum(request.output_length for request in requests)
    prompt = sum(len(request.prompt) for request in requests)
    rates = [output / s for s in seconds if s > 0]
    total = sum(seconds)
    return GenerateRow(
        **row, status="ok", output_tokens_per_s=output * repeats / total, total_tokens_per_s=(output + prompt) * repeats
        / total, repeat_tokens_per_s=rates, spread=repeat_spread(rates, noise_cv), requests=len(requests),
        prompt_tokens=prompt, output_tokens=output, measured_seconds=total, warmup_seconds=warmup_seconds,
        memory=memory[0])
