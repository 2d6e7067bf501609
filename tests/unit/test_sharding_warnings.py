"""A model sharded with FSDP2 whose output is a view (the fused loss's final hidden states, sliced by
transformers before the head) runs without FSDP2's warning about views, which every rank would print at every
step. One gloo rank in this process."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from torch import nn

from padbench.worker.engine.parallel.sharding import shard_model


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.linear(inputs)


class ReturnsAView(nn.Module):
    _no_split_modules = ("Block",)  # what transformers' models name their decoder layers by

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.block(inputs)[:, 0:]  # as transformers slices the hidden states kept for the head


@pytest.fixture
def one_gloo_rank(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.usefixtures("one_gloo_rank")
def test_a_sharded_model_returning_a_view_trains_without_fsdp_warning_about_it() -> None:
    model = ReturnsAView()
    with warnings.catch_warnings(record=True) as seen:
        shard_model(model, SimpleNamespace(world=1), torch.device("cpu"), compute_dtype=None)  # type: ignore[arg-type]
        model(torch.randn(2, 3, 8)).sum().backward()
    assert not [warning for warning in seen if "returned a view tensor" in str(warning.message)]
