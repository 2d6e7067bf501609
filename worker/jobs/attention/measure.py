"""Measuring one (kernel, problem) cell: time, achieved TFLOP/s, peak memory and error against float64.

- Timing rotates among several input sets, so a kernel is never timed on data its caches already hold.
- The first call (which includes any JIT or torch.compile work) is timed on its own and reported as the
  warm-up figure; further warm-up calls follow before the timed repeats.
- On CUDA an event marks the end of each repeat and the device is synchronised once, after the last; on
  the CPU a monotonic clock marks each call (the engine's `time_calls`).
- Peak memory is the allocator's peak during the timed calls above what the inputs hold (CUDA), or the
  growth of the process's peak resident set during them (CPU); see PeakMemory.
- The error is ‖out − ref‖/‖ref‖ on a slice of rows and heads, against a float64 reference computed in
  query blocks, so the reference never needs the full N² matrix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from padbench.kinds.attention.contract import AttentionCell
from padbench.worker.engine.measure.timing import time_calls
from padbench.worker.jobs.attention.bindings import KernelCall
from padbench.worker.jobs.attention.inputs import InputSet, Problem, make_input_sets
from padbench.worker.jobs.attention.kernels import SweepKernel
from padbench.worker.runtime import procfs
from padbench.worker.runtime.memory import host_peak_rss_bytes

INPUT_SETS = 3
REFERENCE_ROWS = 1
REFERENCE_KV_HEADS = 2
# Bytes of float64 scores per reference block: small beside any device, and inside a CPU test budget.
REFERENCE_BLOCK_BYTES = 8 * 2**20

Step = Callable[[], None]


@dataclass(frozen=True)
class CellSettings:
    warmup: int
    repeats: int
    check_error: bool


def measure_cell(kernel: SweepKernel, problem: Problem, device: torch.device, settings: CellSettings) -> AttentionCell:
    sets = make_input_sets(problem, device, INPUT_SETS)
    memory = PeakMemory(device)
    calls = [kernel.bind(problem, inputs) for inputs in sets]
    steps = [_step(call, inputs, problem.backward) for call, inputs in zip(calls, sets, strict=True)]
    warmup_ms = _time_once(steps[0], device)
    for index in range(1, settings.warmup):
        steps[index % len(steps)]()
    memory.open_window()
    durations = _time_repeats(steps, settings.repeats, device)
    peak = memory.peak_above_baseline()
    error = relative_error(calls[0], sets[0], problem) if settings.check_error else None
    median, p10, p90 = (float(v) for v in np.percentile(durations, [50, 10, 90]))
    return AttentionCell(kernel=kernel.name, seq_len=problem.seq_len, status="ok", median_ms=median, p10_ms=p10,
                         p90_ms=p90, tflops=problem.flops / (median * 1e-3) / 1e12, peak_memory_bytes=peak,
                         rel_error=error, warmup_ms=warmup_ms)


def _step(call: KernelCall, inputs: InputSet, backward: bool) -> Step:
    if not backward:
        def forward() -> None:
            with torch.no_grad():
                call()

        return forward

    leaves = (inputs.query, inputs.key, inputs.value)

    def forward_backward() -> None:
        # autograd.grad returns the gradients instead of accumulating them into .grad across repeats
        torch.autograd.grad(call(), leaves, inputs.grad_output)

    return forward_backward


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_once(step: Step, device: torch.device) -> float:
    _synchronize(device)
    started = time.perf_counter()
    step()
    _synchronize(device)
    return (time.perf_counter() - started) * 1e3


def _time_repeats(steps: list[Step], repeats: int, device: torch.device) -> list[float]:
    """Milliseconds per call, rotating through the input sets."""
    seconds = time_calls([steps[index % len(steps)] for index in range(repeats)], device)
    return [value * 1e3 for value in seconds]


class PeakMemory:
    """Peak bytes during the timed calls, above a baseline.

    CUDA: the baseline is the allocator's usage before binding, so masks a kernel builds at bind time
    count as its memory; the peak window opens after warm-up, so autotuning buffers do not. CPU: the
    resident set also holds compiled code, so the baseline is the resident set when the window opens
    and the figure is the growth during the timed calls (None where Linux cannot reset the counter).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.baseline: int | None = None
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            self.baseline = torch.cuda.memory_allocated(device)

    def open_window(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif procfs.reset_peak_rss():
            self.baseline = host_peak_rss_bytes()

    def peak_above_baseline(self) -> int | None:
        if self.baseline is None:
            return None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return torch.cuda.max_memory_allocated(self.device) - self.baseline
        peak = host_peak_rss_bytes()
        return None if peak is None else max(peak - self.baseline, 0)


# --- error against float64 ------------------------------------------------------------------------------------

def relative_error(call: KernelCall, inputs: InputSet, problem: Problem) -> float:
    # In the grad mode it was timed in: a compiled kernel guards on that mode and would recompile.
    with torch.set_grad_enabled(problem.backward):
        output = call().detach()
    with torch.no_grad():
        rows, heads, kv_heads = _reference_slice(problem)
        reference = reference_attention(inputs, problem, rows, heads, kv_heads)
        difference = output[:rows, :, :heads].double() - reference
        return float(torch.linalg.vector_norm(difference) / torch.linalg.vector_norm(reference))


def _reference_slice(problem: Problem) -> tuple[int, int, int]:
    """Rows, query heads and key/value heads of the checked subset (whole GQA groups)."""
    groups = problem.heads // problem.kv_heads
    kv_heads = min(problem.kv_heads, REFERENCE_KV_HEADS)
    return min(problem.batch, REFERENCE_ROWS), kv_heads * groups, kv_heads


def reference_attention(inputs: InputSet, problem: Problem, rows: int, heads: int, kv_heads: int) -> torch.Tensor:
    """Float64 attention for the first `rows` rows and `heads` query heads, one query block at a time."""
    groups = problem.heads // problem.kv_heads
    q = inputs.query[:rows, :, :heads].double().transpose(1, 2)
    k, v = (t[:rows, :, :kv_heads].double().transpose(1, 2).repeat_interleave(groups, dim=1)
            for t in (inputs.key, inputs.value))
    block = max(1, REFERENCE_BLOCK_BYTES // (rows * heads * problem.seq_len * 8))
    blocks = []
    for start in range(0, problem.seq_len, block):
        stop = min(start + block, problem.seq_len)
        scores = torch.matmul(q[:, :, start:stop], k.transpose(-1, -2)) * problem.head_dim ** -0.5
        allowed = _allowed_block(inputs, problem, rows, start, stop)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        blocks.append(torch.matmul(torch.softmax(scores, dim=-1), v))
    return torch.cat(blocks, dim=2).transpose(1, 2)


def _allowed_block(inputs: InputSet, problem: Problem, rows: int, start: int, stop: int) -> torch.Tensor | None:
    """(rows, 1, stop-start, N) bool for queries start…stop, or None for full attention."""
    device = inputs.query.device
    allowed = None
    if problem.causal:
        queries = torch.arange(start, stop, device=device)[:, None]
        allowed = (queries >= torch.arange(problem.seq_len, device=device)[None, :])[None, None]
    if inputs.documents is not None:
        ids = inputs.documents.document_ids[:rows]
        same = (ids[:, start:stop, None] == ids[:, None, :])[:, None]
        allowed = same if allowed is None else same & allowed
    return allowed
