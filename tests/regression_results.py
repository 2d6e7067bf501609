"""Hand-built padding results of one fingerprint, for the tests of histories, baselines and regression checks:
rows whose repeats are given, measured under given versions on a given date."""

from __future__ import annotations

from typing import Any

from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.contract.results import Environment
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult, StrategyResult
from padbench.worker.engine.measure.spread import repeat_spread

SPEC: dict[str, Any] = {"device": "cpu", "dtype": "fp32", "attention": "sdpa", "name": "tiny-cpu"}
STEADY = [1000.0, 1010.0, 990.0, 1005.0, 995.0]  # repeats of a row, about 0.8% apart


def scaled(repeats: list[float], factor: float) -> list[float]:
    return [rate * factor for rate in repeats]


def padding_result(rows: dict[str, list[float]], *, spec: dict[str, Any] | None = None, torch: str = "2.13.0",
                   padbench: str = "0.1.0", date: str = "2026-11-21T12:00:00+00:00") -> PaddingResult:
    """A result whose row per layout (`static`, `dynamic`, …) has these repeats; versions and date as given."""
    parsed = parse_job_spec(spec or SPEC)
    assert isinstance(parsed, PaddingJobSpec)
    environment = Environment(hostname="test-host", device="cpu", python="3.11", torch=torch, padbench=padbench,
                              dataset_digest="0123456789abcdef", started_at=date)
    strategies = [StrategyResult(strategy=name, attention="sdpa", kernel="sdpa", batch_size=8, status="ok",
                                 tokens_per_s=sum(repeats) / len(repeats), repeat_tokens_per_s=repeats,
                                 spread=repeat_spread(repeats, 0.05))
                  for name, repeats in rows.items()]
    return PaddingResult(spec=parsed, environment=environment, model_parameters=1_000_000,
                         flops_per_token=6_000_000.0, num_sequences=10, real_tokens_total=970, strategies=strategies)


def document(result: PaddingResult) -> dict[str, Any]:
    return JOB_RESULT_ADAPTER.dump_python(result, mode="json")
