"""`batch_size: auto:N`: length tiers, binned batched per tier, and the sizes the probe chooses on a simulated
device (the probe's children are covered in tests/integration/test_padding_probe_children.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

from padbench.contract.results import ProbeReport
from padbench.contract.spec import DataSpec, StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.engine.data.batches import STRATEGIES, PaddedBatch
from padbench.worker.engine.data.sources import load_sequences
from padbench.worker.engine.strategies.tiers import TieredStrategy, length_tiers
from padbench.worker.jobs.padding import auto_batch

ROW_TOKENS = 4096  # the simulated device holds this many tokens of rows: 4096 // width rows


def test_tiers_split_the_lengths_into_equal_counts_and_merge_equal_ends() -> None:
    assert length_tiers([5, 1, 9, 3, 7, 2], 3) == [(2, 2), (5, 2), (9, 2)]
    assert length_tiers([8, 8, 8, 8, 1, 2], 3) == [(2, 2), (8, 4)]  # two tiers ending at 8 are one
    assert length_tiers([4, 6], 16) == [(4, 1), (6, 1)]


def test_binned_batches_each_tier_at_its_size() -> None:
    sequences = load_sequences(DataSpec(num_samples=200, max_length=128, seed=5), vocab_size=1000).sequences
    binned = STRATEGIES.get("binned")
    assert isinstance(binned, TieredStrategy) and not isinstance(STRATEGIES.get("dynamic"), TieredStrategy)
    tiers = [(longest, ROW_TOKENS // longest // 8) for longest, _ in length_tiers(list(map(len, sequences)), 3)]
    batches = list(binned.tiered_batches(sequences, StrategySpec(name="binned", n_bins=6), tiers, 128, 0, 0))
    assert Counter(i for batch in batches for i in batch.sequence_ids) == Counter(range(len(sequences)))
    for batch in batches:
        assert isinstance(batch, PaddedBatch)
        longest, size = next((longest, size) for longest, size in tiers if max(batch.lengths) <= longest)
        assert batch.rows <= size and batch.width <= longest
    assert {batch.rows for batch in batches} >= {size for _, size in tiers[:-1]}  # full batches in every tier


def fake_find_batch_size(spec: PaddingJobSpec, strategy: StrategySpec, kernel: str, progress: Any,
                         **_: Any) -> ProbeReport:
    """A device where rows as wide as the probed max_length fit ROW_TOKENS tokens; the margin is taken off."""
    largest = ROW_TOKENS // spec.data.max_length
    return ProbeReport(chosen=largest - largest // 20, largest_fit=largest, smallest_oom=largest + 1,
                       predicted_limit=None, margin=0.05, cap=4096, probes=[], seconds=0.0)


def test_the_probe_chooses_a_size_per_tier_for_binned_and_one_for_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto_batch, "find_batch_size", fake_find_batch_size)
    spec = PaddingJobSpec(device="cpu", dtype="fp32", attention="sdpa", batch_size="auto:4",
                          data={"max_length": 128}, probe={"cpu_memory_budget_bytes": 2**30},
                          strategies=[StrategySpec(name="binned", n_bins=8), StrategySpec(name="static"),
                                      StrategySpec(name="packed", batch_size="auto")])
    lengths = [16] * 10 + [32] * 10 + [64] * 10 + [128] * 10
    sizes = auto_batch.probe_auto_batch_sizes(auto_batch.expand_axes(spec), torch.device("cpu"), lambda *_: None,
                                              lengths=lambda: lengths)
    binned = sizes.tiers[0]
    assert [(t.longest, t.sequences, t.probe.largest_fit, t.batch_size) for t in binned] == [
        (16, 10, 256, 244), (32, 10, 128, 122), (64, 10, 64, 61), (128, 10, 32, 31)]
    assert sizes.tiers_of(0) == [(16, 244), (32, 122), (64, 61), (128, 31)]
    assert [t.longest for t in sizes.tiers[1]] == [128] and sizes.tiers_of(1) is None  # static: one worst case
    assert 2 not in sizes.tiers and sizes.times == {0: 4, 1: 4}  # plain `auto`: no tiers
    assert [s.batch_size for s in sizes.spec.strategies] == [31, 31, 31]  # every row's size fits any batch


def test_auto_n_is_bounded_and_probes_like_auto() -> None:
    assert PaddingJobSpec(batch_size=["auto:16", "auto", 8]).batch_size == ["auto:16", "auto", 8]
    for wrong in ("auto:0", "auto:17", "auto:", "auto:2x"):
        with pytest.raises(ValueError, match=r"'auto:N' \(N from 1 to 16\)"):
            PaddingJobSpec(batch_size=wrong)
    on_cpu = PaddingJobSpec(device="cpu", dtype="fp32", attention="sdpa", batch_size="auto:4")
    [(where, why)] = on_cpu.new_job_problems()
    assert where == ("batch_size",) and "needs probe.cpu_memory_budget_bytes" in why
