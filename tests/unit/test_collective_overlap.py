"""Exposed communication from a profile's timeline: collective intervals against compute intervals."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.autograd import DeviceType

from padbench.worker.engine.parallel.overlap import collective_time, overlap, union


def event(name: str, start: float, end: float, thread: int = 1, device: DeviceType = DeviceType.CPU) -> Any:
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), thread=thread,
                           device_type=device)


def test_union_and_overlap_of_intervals() -> None:
    assert union([(5, 8), (0, 2), (1, 3), (8, 9)]) == [(0, 3), (5, 9)]
    assert overlap([(0, 3), (5, 9)], [(2, 6), (8, 20)]) == 1 + 1 + 1


def test_gloo_collectives_against_the_computing_threads() -> None:
    """gloo runs on its own threads: its ops' intervals minus what the other threads' operators covered; an
    operator inside gloo's thread (its copies) is no compute, and a wait is no operator at all."""
    events = [event("gloo:all_gather", 0, 1000, thread=2), event("aten::copy_", 10, 20, thread=2),
              event("gloo:reduce_scatter", 3000, 4000, thread=3),
              event("aten::mm", 200, 700), event("aten::addmm", 600, 900), event("FSDP::all_gather", 0, 1000),
              event("aten::mm", 3500, 5000)]
    time = collective_time(events, torch.device("cpu"), steps=2)
    assert time.total_s == pytest.approx(2000 / 1e6 / 2)
    assert time.exposed_s == pytest.approx((2000 - 700 - 500) / 1e6 / 2)


def test_nccl_kernels_against_the_other_kernels_on_the_gpu() -> None:
    cuda = DeviceType.CUDA
    events = [event("ncclDevKernel_AllGather_RING_LL", 0, 100, device=cuda),
              event("ncclDevKernel_ReduceScatter_RING_LL", 50, 150, device=cuda),
              event("ampere_bf16_gemm", 120, 400, device=cuda), event("aten::mm", 0, 150)]  # a host op: no kernel
    time = collective_time(events, torch.device("cuda"), steps=1)
    assert time.total_s == pytest.approx(150 / 1e6) and time.exposed_s == pytest.approx(120 / 1e6)
