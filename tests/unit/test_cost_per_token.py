"""Cost per token: the worker's price stamped on its results, and each row's $ per million tokens from it."""

from __future__ import annotations

import pytest

from padbench.kinds.padding.report import render_table
from padbench.report.efficiency import cost_lines, dollars_per_million_tokens, row_costs
from padbench.worker.cli.work import load_settings
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.supervisor.reporting import priced
from tests.regression_results import SPEC, STEADY, document, padding_result


def with_price(price: float | None, **spec: object):
    result = padding_result({"static": STEADY, "dynamic": [2000.0, 2020.0, 1980.0]}, spec={**SPEC, **spec})
    return result.model_copy(update={"environment": result.environment.model_copy(
        update={"price_per_gpu_hour": price})})


def test_a_million_tokens_cost_the_price_of_the_hours_they_take() -> None:
    assert dollars_per_million_tokens(3.6, 1, 1000.0) == pytest.approx(1.0)  # 1000 s at $3.6/h
    assert dollars_per_million_tokens(3.6, 4, 1000.0) == pytest.approx(4.0)  # four GPUs held as long
    assert dollars_per_million_tokens(3.6, 1, 0.0) is None


def test_rows_are_priced_only_when_the_worker_gave_a_price() -> None:
    costs = row_costs(with_price(3.6))
    assert costs[("static", "sdpa")] == pytest.approx(1.0) and costs[("dynamic", "sdpa")] == pytest.approx(0.5)
    lines = cost_lines(with_price(3.6))
    assert lines[0] == "cost per million tokens (counted as tokens/s) at $3.6 per hour of the machine:"
    assert lines[1:] == ["  dynamic / sdpa: $0.5", "  static / sdpa: $1"]
    assert "cost per million tokens" in render_table(with_price(3.6))
    assert row_costs(with_price(None)) == {} and "cost per million" not in render_table(with_price(None))


def test_the_worker_stamps_its_price_on_every_result_it_reports() -> None:
    stamped = priced(document(with_price(None)), 2.5)
    assert stamped["environment"]["price_per_gpu_hour"] == 2.5
    assert priced(document(with_price(None)), None)["environment"]["price_per_gpu_hour"] is None
    assert priced(None, 2.5) is None  # a cancelled job without rows reports nothing to price


def test_price_per_gpu_hour_from_the_command_line_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from padbench.worker.cli.work import add_worker_command

    parser = argparse.ArgumentParser()
    add_worker_command(parser.add_subparsers())
    settings = load_settings(parser.parse_args(["worker", "--price-per-gpu-hour", "2.49"]))
    assert settings is not None and settings.price_per_gpu_hour == 2.49
    monkeypatch.setenv("PADBENCH_PRICE_PER_GPU_HOUR", "1.5")
    assert WorkerSettings().price_per_gpu_hour == 1.5
    assert load_settings(parser.parse_args(["worker", "--price-per-gpu-hour", "-1"])) is None
