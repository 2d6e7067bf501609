"""FSDP2's overlap settings on two gloo ranks: `distributed.reshard_after_forward` and `distributed.prefetch`
reach the sharded decoder layers (the result states what the layers were found to hold), and the job trains
through the correctness gate either way; each rank reports its time in collectives and the part of it exposed."""

from __future__ import annotations

from pathlib import Path

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingResult
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.worker.jobs import spec_json
from padbench.worker.runtime.launcher import launch_job

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow  # two ranks importing torch and transformers
@pytest.mark.parametrize(("reshard", "prefetch", "words"), [
    (False, True, "keeps gathered weights for backward, explicit prefetch"),
    (True, False, "reshards after forward, implicit prefetch")])
def test_the_overlap_settings_reach_the_sharded_layers(tmp_path: Path, reshard: bool, prefetch: bool,
                                                       words: str) -> None:
    spec = parse_job_spec({
        "kind": "padding", "mode": "training", "model": {"preset": "tiny-llama"}, "gpus": 2, "device": "cpu",
        "data": {"source": "synthetic", "max_length": 32, "num_samples": 16, "seed": 5},
        "strategies": ["packed"], "attention": "sdpa", "batch_size": 2, "dtype": "fp32",
        "distributed": {"reshard_after_forward": reshard, "prefetch": prefetch},
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 1,
                        "repeats": 1}})
    report = launch_job("padbench.worker.jobs:run_job", spec_json(spec), ranks=2, timeout_s=400, env=CPU_ONLY,
                        workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    result = PaddingResult.model_validate(report.value)
    assert result.parallel is not None and result.parallel.parallelism == "sharded"
    assert (result.parallel.reshard_after_forward, result.parallel.prefetch) == (reshard, prefetch)
    (row,) = result.strategies
    assert row.status == "ok" and row.correctness_passed, (row.error, row.invalid_reason)
    text = render_table(result)
    assert f"sharded (FSDP2, {words})" in text
    # every rank's time in collectives, and the part of it no compute overlapped, from the profiler's timeline
    assert row.per_rank is not None and len(row.per_rank.ranks) == 2
    for rank in row.per_rank.ranks:
        total, exposed = rank.collective_seconds_per_step, rank.exposed_collective_seconds_per_step
        assert total is not None and exposed is not None and 0 < exposed <= total
    assert "ms exposed (" in text and "communication exposed at most " in text
    (fields,) = csv_rows(result)
    assert fields["max_rank_exposed_collective_seconds_per_step"] == max(
        rank.exposed_collective_seconds_per_step or 0.0 for rank in row.per_rank.ranks)
