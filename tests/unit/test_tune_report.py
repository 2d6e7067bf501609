"""The table every view renders from a tune's result: the winner first, the verdict and its margin, the devices
the tune ran on and the memory it was allowed, and the settings to paste."""

from __future__ import annotations

from padbench.contract.results import Environment, Spread
from padbench.kinds.tune.contract import Finalist, TuneJobSpec, TuneResult, TuneTrial
from padbench.kinds.tune.report import header_lines, render_table, result_table
from padbench.worker.jobs.tune.equivalents import equivalents
from padbench.worker.jobs.tune.space import configurations
from tests.unit.test_tune_plan import tune


def finished(spec: TuneJobSpec) -> TuneResult:
    configs = configurations(spec, [])
    trials = [TuneTrial(config=configs[0], fate="finalist", rounds=2, tokens_per_s=1000.0, peak_memory_bytes=2**20),
              TuneTrial(config=configs[1], fate="finalist", rounds=2, tokens_per_s=900.0),
              TuneTrial(config=configs[2], fate="stopped", rounds=1, tokens_per_s=500.0, reason="round 1: slower"),
              TuneTrial(config=configs[3], fate="pruned", reason="the memory plan needs more")]
    spread = Spread(repeats=3, min_tokens_per_s=990, max_tokens_per_s=1010, mean_tokens_per_s=1000,
                    ci95_low_tokens_per_s=980, ci95_high_tokens_per_s=1020, cv=0.01, cv_threshold=0.05, noisy=False)
    finalists = [Finalist(trial=0, tokens_per_s=1000.0, spread=spread, status="ok"),
                 Finalist(trial=1, tokens_per_s=800.0, spread=spread.model_copy(update={"mean_tokens_per_s": 800}),
                          status="ok")]
    environment = Environment(hostname="box", device="cpu", python="3.11", torch="2.13", started_at="2026-11-27")
    return TuneResult(spec=spec, environment=environment, trials=trials, finalists=finalists, winner=0,
                      wall_seconds=42.0, equivalents=equivalents(spec, configs[0]))


def test_the_table_leads_with_the_winner_and_ends_with_the_settings_to_paste() -> None:
    result = finished(tune())
    table = result_table(result)
    assert [row.row for row in table.rows] == [0, 1, 2, 3] and table.rows[0].mark == "winner"
    assert table.rows[3].mark == "doubtful" and table.notes == ["round 1: slower", "the memory plan needs more"]
    assert table.verdict[0].startswith("verdict: fastest that fits: dynamic · sdpa · batch 4")
    assert "1.25× the next finalist" in table.verdict[1] and "95% interval" in table.verdict[1]
    text = render_table(result)
    assert "settings to paste:" in text and '"kind": "padding"' in text and "the tune took 42 s" in text


def test_a_faster_finalist_that_failed_in_full_is_named_beside_the_verdict() -> None:
    result = finished(tune())
    faster = result.trials[1].model_copy(update={"tokens_per_s": 1500.0})
    failed = Finalist(trial=1, status="failed", reason="RuntimeError: a kernel broke")
    result = result.model_copy(update={"trials": [result.trials[0], faster, *result.trials[2:]],
                                       "finalists": [result.finalists[0], failed]})
    verdict = result_table(result).verdict
    assert verdict[0].startswith("verdict: fastest that fits: dynamic · sdpa · batch 4")
    assert verdict[1] == (f"  note: {faster.config.label} ran 1,500 tokens/s in round 2 but failed in the finalists' "
                          "run (RuntimeError: a kernel broke)")


def test_the_header_counts_gpus_only_on_gpus() -> None:
    on_cpu = finished(tune()).model_copy(update={"memory_bytes": 2**30})
    assert " · fp32 · cpu on box · " in header_lines(on_cpu)[0] and "GPU" not in header_lines(on_cpu)[0]
    assert "1.0 GiB allowed (tune.memory_bytes)" in header_lines(on_cpu)[1]
    assert header_lines(on_cpu)[2].startswith("peak memory here is the trial process's resident memory")
    gpu = on_cpu.environment.model_copy(update={"device": "cuda", "gpu_name": "NVIDIA H200"})
    on_gpus = on_cpu.model_copy(update={"environment": gpu, "spec": on_cpu.spec.model_copy(update={"gpus": 2})})
    assert " · 2 GPUs · NVIDIA H200 on box · " in header_lines(on_gpus)[0]
    assert "1.0 GiB per GPU" in header_lines(on_gpus)[1]
    assert not any("resident memory" in line for line in header_lines(on_gpus))
