"""Timing short GPU work as a CUDA graph: one replay of many calls, so launch overhead does not count."""

from __future__ import annotations

from collections.abc import Callable

import torch


def graph_micros(call: Callable[[int], object], calls: int, replays: int = 20) -> float:
    """Microseconds per call of `call(i)` for i in range(calls), captured once and replayed `replays` times.

    The calls run once on a side stream first, as capture requires (and so that lazily compiled kernels are
    compiled before it). Passing each call its index lets it read different memory per call (each layer's
    weight, say), so that data comes from memory rather than from the L2 cache, as in a model's step."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for index in range(calls):
            call(index)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for index in range(calls):
            call(index)
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / (replays * calls)
