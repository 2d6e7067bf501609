"""A strategy row's figures from its timed passes: throughput, latency, slot use, bandwidth and MFU.

Every figure comes from the step times the device measured and the step records the schedule wrote; a
figure whose inputs are missing (no decode step, no copy bandwidth, no matmul rate) is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from padbench.kinds.generate.contract import Latency
from padbench.worker.jobs.generate.passes import PassTiming
from padbench.worker.jobs.generate.schedule import Request, StepRecord


@dataclass(frozen=True)
class ModelCosts:
    """What one token and one decode step cost the device, read off the built model."""

    weight_bytes: int  # every parameter once (a tied embedding read once, by the LM head)
    kv_bytes_per_token: int
    body_flops_per_token: int  # every linear layer but the LM head
    head_flops_per_logit: int  # the LM head, computed only where a next token is chosen
    attention_flops_per_key: int  # score and value matmuls of one query against one key, all layers
    copy_bytes_per_s: float | None
    matmul_flops: float | None
    peak_flops: float | None


def latency(seconds: Sequence[float]) -> Latency | None:
    values = np.asarray(seconds, dtype=np.float64)
    if values.size == 0:
        return None
    return Latency(p50_ms=float(np.percentile(values, 50)) * 1e3, p99_ms=float(np.percentile(values, 99)) * 1e3,
                   mean_ms=float(values.mean()) * 1e3, samples=int(values.size))


def request_times(timing: PassTiming) -> dict[int, tuple[float, list[float]]]:
    """Each request's admission to a slot and its token times in one pass, in seconds from the pass's start: it is
    admitted at the start of the step that prefills it, and has a token at the end of every step that gives it one.

    The steps run back to back, each timed from the previous one's end, so a step starts at the sum of the step
    times before it."""
    admitted: dict[int, float] = {}
    tokens: dict[int, list[float]] = {}
    start = 0.0
    for seconds, record in zip(timing.step_seconds, timing.records, strict=True):
        admitted |= dict.fromkeys(record.admitted, start)
        for row in (*record.admitted, *record.decoded):
            tokens.setdefault(row, []).append(start + seconds)
        start += seconds
    return {row: (admitted[row], times) for row, times in tokens.items()}


def serving_latencies(passes: Sequence[PassTiming]) -> dict[str, Latency | None]:
    """TTFT, TPOT and ITL as serving benchmarks define them (vLLM's benchmarks/benchmark_serving.py), over every
    request of every pass: TTFT from a request's admission to its first token; TPOT per request of two or more
    tokens, (latency − TTFT) / (output tokens − 1): its first token to its last, over the tokens after the first;
    ITL, each gap between two consecutive tokens of a request."""
    first: list[float] = []
    per_output_token: list[float] = []
    gaps: list[float] = []
    for timing in passes:
        for admitted, times in request_times(timing).values():
            first.append(times[0] - admitted)
            if len(times) > 1:
                per_output_token.append((times[-1] - times[0]) / (len(times) - 1))
                gaps += np.diff(times).tolist()
    return {"time_to_first_token": latency(first), "time_per_output_token": latency(per_output_token),
            "inter_token_latency": latency(gaps)}


def _steps(passes: Sequence[PassTiming]) -> list[tuple[float, StepRecord]]:
    return [(seconds, record) for timing in passes
            for seconds, record in zip(timing.step_seconds, timing.records, strict=True)]


def row_figures(passes: Sequence[PassTiming], requests: Sequence[Request], costs: ModelCosts) -> dict[str, object]:
    """Figures shared by every row kind; the caller adds the headline's spread and the status."""
    by_row = {request.row: request for request in requests}
    seconds = sum(timing.seconds for timing in passes)
    output = sum(request.output_length for request in requests) * len(passes)
    prompt = sum(len(request.prompt) for request in requests) * len(passes)
    decode_time, decode_tokens, decode_bytes = 0.0, 0, 0
    flops = useful = slots = prefills = interleaved = decode_steps = pads = bucket_pads = bucketed = 0
    for step_seconds, record in _steps(passes):
        useful, slots, pads = useful + record.useful_decodes, slots + record.decode_slots, pads + record.pad_tokens
        prefills += bool(record.admitted)
        interleaved += record.kind == "mixed"
        bucket_pads += record.bucket_pad_tokens
        bucketed += record.bucketed
        prompts = [len(by_row[row].prompt) for row in record.admitted]
        computed = record.prompt_tokens + record.pad_tokens + record.bucket_pad_tokens + record.decode_slots
        logits = len(record.admitted) + record.decode_slots
        flops += (computed * costs.body_flops_per_token + logits * costs.head_flops_per_logit
                  + costs.attention_flops_per_key * (record.kv_read_tokens + sum(n * (n + 1) // 2 for n in prompts)))
        if record.kind == "decode":
            decode_steps += 1
            decode_time += step_seconds
            decode_tokens += record.useful_decodes
            decode_bytes += costs.weight_bytes + record.kv_read_tokens * costs.kv_bytes_per_token
    achieved = flops / seconds if seconds > 0 else None
    return {
        "output_tokens_per_s": output / seconds if seconds > 0 else None,
        "total_tokens_per_s": (output + prompt) / seconds if seconds > 0 else None,
        "decode_tokens_per_s": decode_tokens / decode_time if decode_time > 0 else None,
        **serving_latencies(passes),
        "slot_utilization": useful / slots if slots else None,
        "requests": len(requests), "prompt_tokens": prompt // len(passes), "output_tokens": output // len(passes),
        "prompt_pad_tokens": pads // len(passes), "bucket_pad_tokens": bucket_pads // len(passes),
        "bucketed_prefill_steps": bucketed // len(passes), "decode_steps": decode_steps // len(passes),
        "prefill_steps": prefills // len(passes), "interleaved_prefills": interleaved // len(passes),
        "measured_seconds": seconds,
        "bandwidth_utilization": decode_bytes / decode_time / costs.copy_bytes_per_s
        if decode_time > 0 and costs.copy_bytes_per_s else None,
        "mfu": achieved / costs.peak_flops if achieved and costs.peak_flops else None,
        "mfu_vs_matmul": achieved / costs.matmul_flops if achieved and costs.matmul_flops else None,
    }


def repeat_rates(passes: Sequence[PassTiming], requests: Sequence[Request]) -> list[float]:
    output = sum(request.output_length for request in requests)
    return [output / timing.seconds for timing in passes if timing.seconds > 0]
