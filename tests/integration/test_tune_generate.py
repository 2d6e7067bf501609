"""A tune in generate mode on the CPU: batching strategies × decode kernels × concurrency, pruned by the KV cache
the memory plan counts, narrowed by generate jobs in children, the winner measured with repeats and a generate
spec to paste that parses as one."""

from __future__ import annotations

import json

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.kinds.generate.contract import GenerateJobSpec
from padbench.kinds.tune.contract import TuneConfig, TuneJobSpec
from padbench.kinds.tune.report import verdict_lines
from padbench.worker.jobs.tune.job import run_tune_job
from padbench.worker.jobs.tune.memory import planner
from padbench.worker.jobs.tune.space import configurations

SPACE = {"strategies": ["static", "continuous"], "kernels": ["sdpa", "eager"], "batch_sizes": [2, 4, 64],
         "compile": [False]}
TUNE = {"kind": "tune", "name": "tiny-generate-tune", "model": "tiny", "device": "cpu", "dtype": "fp32",
        "mode": "generate", "output_length": 4, "data": {"num_samples": 8, "max_length": 16},
        # A limit, not a target (every configuration is decided long before it): room for a loaded machine.
        "tune": {"budget": "10m", "first_round_batches": 1, "repeats": 2, "finalists": 2, "space": SPACE}}


def spec(**tune: object) -> TuneJobSpec:
    return TuneJobSpec.model_validate({**TUNE, "tune": {**TUNE["tune"], **tune}})  # type: ignore[dict-item]


def test_generate_configurations_are_strategy_kernel_concurrency_and_compile() -> None:
    configs = configurations(spec(), ["sdpa"])
    assert len(configs) == 2 * 2 * 3
    assert configs[0] == TuneConfig(layout="static", kernel="sdpa", batch_size=2, compile=False)
    assert all(config.checkpointing is None and config.precision is None for config in configs)


def test_the_plan_counts_the_kv_cache_of_the_concurrency() -> None:
    plans = planner(spec(), ranks=1)
    small, large = (plans.fit(TuneConfig(layout="static", kernel="sdpa", batch_size=size, compile=False), None)
                    for size in (2, 64))
    assert small.state == large.state and large.activations == 32 * small.activations


def test_a_kernel_without_a_decode_path_is_refused_naming_the_field() -> None:
    problems = dict(spec(space={**SPACE, "kernels": ["flash-attn"]}).new_job_problems())
    assert "KV-cache" in problems[("tune", "space", "kernels", "0")]


@pytest.mark.slow  # generate jobs in child processes
def test_a_generate_tune_finds_the_fastest_strategy_and_kernel_and_pastes_a_generate_spec() -> None:
    plans = planner(spec(), ranks=1)
    needs = {size: plans.fit(TuneConfig(layout="static", kernel="sdpa", batch_size=size, compile=False), None).needed
             for size in (4, 64)}
    budget = int((needs[4] + needs[64]) / 2 / 0.9)  # concurrency 64's KV cache does not fit; 4's does
    result = run_tune_job(spec(memory_bytes=budget), lambda _f, _m: None, lambda _r: None, lambda: ["sdpa", "eager"])
    fates = [trial.fate for trial in result.trials]
    assert len(result.trials) == 12 and "not reached" not in fates
    pruned = [trial for trial in result.trials if trial.fate == "pruned"]
    assert pruned and all(trial.config.batch_size == 64 for trial in pruned)
    assert sum(trial.rounds > 0 for trial in result.trials) == 8  # every configuration that fits was measured
    assert result.winner is not None and fates.count("finalist") == 2
    winner = next(finalist for finalist in result.finalists if finalist.trial == result.winner)
    assert winner.status == "ok" and winner.spread is not None and winner.spread.repeats == 2
    chosen = result.trials[result.winner]
    assert chosen.kernel_ran is not None and chosen.tokens_per_s
    pasted = parse_job_spec(json.loads(result.equivalents[0].settings or ""))
    assert isinstance(pasted, GenerateJobSpec) and pasted.attention == chosen.config.kernel
    assert pasted.batch_size == chosen.config.batch_size and pasted.strategies == [chosen.config.layout]
    assert pasted.data.num_samples == 8 and len(result.equivalents) == 1
    assert verdict_lines(result)[0].endswith("output tokens/s")
