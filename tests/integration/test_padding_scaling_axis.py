"""A scaling axis (`gpus: [1, 2]`) on CPU processes: one launch per count, one row per count, each with its
tokens/s per GPU and its efficiency against the smallest count."""

from __future__ import annotations

from pathlib import Path

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.contract import PaddingResult
from padbench.kinds.padding.plot import padding_plot
from padbench.kinds.padding.report import csv_rows, render_table
from padbench.kinds.padding.scaling import scaling_curves
from padbench.report.fingerprint import measured_rows
from padbench.worker.jobs import spec_json
from padbench.worker.runtime.launcher import launch_job

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow  # three processes in turn, each importing torch and transformers
def test_a_scaling_axis_measures_each_count_and_its_efficiency(tmp_path: Path) -> None:
    spec = parse_job_spec({
        "kind": "padding", "mode": "inference", "model": {"preset": "tiny-llama"}, "gpus": [1, 2], "device": "cpu",
        "data": {"source": "synthetic", "max_length": 32, "num_samples": 16, "seed": 5},
        "strategies": ["packed"], "attention": "sdpa", "batch_size": 2, "dtype": "fp32",
        "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 1, "correctness_samples": 1,
                        "repeats": 1}})
    # the job's own process launches each count's ranks: one process, as the worker starts it
    report = launch_job("padbench.worker.jobs:run_job", spec_json(spec), ranks=1, timeout_s=400, env=CPU_ONLY,
                        workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    result = PaddingResult.model_validate(report.value)
    assert result.spec.gpus == [1, 2] and result.partial is None
    assert [row.scaling.gpus for row in result.strategies if row.scaling] == [1, 2]
    one, two = result.strategies
    assert (one.status, two.status) == ("ok", "ok"), (one.error, two.error)
    assert one.scaling is not None and two.scaling is not None
    assert one.scaling.efficiency == 1.0 and one.scaling.tokens_per_s_per_gpu == one.tokens_per_s
    assert two.per_rank is not None and two.scaling.tokens_per_s_per_gpu == two.per_rank.tokens_per_s_per_gpu
    assert two.scaling.baseline_gpus == 1 and two.scaling.efficiency is not None
    assert two.scaling.efficiency == pytest.approx(two.scaling.tokens_per_s_per_gpu / one.tokens_per_s)
    text = render_table(result)
    assert "scaling eff." in text and "tokens/s/GPU" in text and "scaling (tokens/s per GPU" in text
    assert [row["gpus"] for row in csv_rows(result)] == [1, 2]
    assert len({row.fingerprint for row in measured_rows(result)}) == 2  # the count tells the rows apart
    assert next(iter(scaling_curves(result).values()))[0][0] == 1
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close(padding_plot(plt, [(None, result)]))
