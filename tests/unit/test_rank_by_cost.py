"""The verdict ranked by speed or by cost: the same rows decide both; by cost it is stated in $ per million
tokens, with the ratio of the costs and its interval; without a price it is ranked by speed and says so."""

from __future__ import annotations

import pytest

from padbench.kinds.generate.contract import GenerateResult
from padbench.kinds.padding.verdict import verdict_lines
from padbench.report import render
from padbench.report.noise import verdict_out
from padbench.report.ranking import NO_PRICE, ranked_verdict
from tests.generate_result import generate_result
from tests.regression_results import STEADY, padding_result, scaled
from tests.unit.test_cost_per_token import with_price


def priced_generate(price: float | None) -> GenerateResult:
    result = generate_result()
    return result.model_copy(update={"environment": result.environment.model_copy(
        update={"price_per_gpu_hour": price})})


def test_a_padding_verdict_by_cost_names_the_cheapest_row_its_cost_and_the_saving_over_static() -> None:
    result = with_price(3.6)  # static 1,000 tokens/s, dynamic 2,000 on one CPU machine at $3.6 an hour
    by_speed = ranked_verdict(result, "speed")
    by_cost = ranked_verdict(result, "cost")
    assert by_speed is not None and by_cost is not None
    assert by_speed.lines == verdict_lines(result) and by_speed.lines[0].startswith("verdict: winner dynamic")
    assert by_cost.lines[0] == "verdict by cost: cheapest dynamic / sdpa at batch 8: $0.5 per million tokens " \
                               "(2k tokens/s)"
    assert by_cost.lines[1].startswith("  saving: 0.50× static's cost (static / sdpa at batch 8: $1), 95% interval ")
    assert by_cost.lines[2] == "  priced at $3.6 per hour of the machine, every row on the same GPUs: the cheapest " \
                               "row is the fastest"
    assert by_cost.winner is by_speed.winner and list(by_cost.ranked) == list(by_speed.ranked)
    assert by_cost.summary == "dynamic / sdpa: $0.5/M tokens"
    out = verdict_out(result, "cost")
    assert out.lines == by_cost.lines and out.winner == verdict_out(result).winner


def test_rows_within_noise_by_speed_are_within_noise_by_cost() -> None:
    tied = padding_result({"static": STEADY, "dynamic": scaled(STEADY, 1.002)})
    result = tied.model_copy(update={"environment": tied.environment.model_copy(update={"price_per_gpu_hour": 1.0})})
    by_cost = ranked_verdict(result, "cost")
    assert by_cost is not None and by_cost.lines[0].startswith("verdict by cost: within noise — dynamic / sdpa")
    assert "do not tell them from the cheapest" in by_cost.lines[0]


def test_without_a_price_a_verdict_by_cost_is_ranked_by_speed_and_says_so() -> None:
    result = with_price(None)
    by_cost = ranked_verdict(result, "cost")
    assert by_cost is not None and by_cost.lines == [*verdict_lines(result), f"  {NO_PRICE}"]
    table = render(result, "table", rank_by="cost")
    assert "verdict: winner dynamic" in table and NO_PRICE in table
    assert render(result, "table") == render(result, "table", rank_by="speed")


@pytest.mark.parametrize("rank_by", ["speed", "cost"])
def test_the_plain_table_carries_the_verdict_asked_for(rank_by: str) -> None:
    table = render(with_price(3.6), "table", rank_by=rank_by)  # type: ignore[arg-type]
    assert ("verdict by cost: cheapest dynamic" in table) == (rank_by == "cost")
    assert ("verdict: winner dynamic" in table) == (rank_by == "speed")


def test_a_generate_verdict_by_cost_prices_output_tokens_against_static_and_the_fastest_reference() -> None:
    result = priced_generate(3.6)  # continuous 2,400 output tokens/s, static 1,000, transformers' best 2,000
    by_cost = ranked_verdict(result, "cost")
    assert by_cost is not None
    assert by_cost.lines[0] == "verdict by cost: cheapest continuous / sdpa-kvcache at batch 16: $0.4167 per " \
                               "million output tokens (2.4k output tokens/s)"
    assert by_cost.lines[1].startswith("  margin: 0.62× the runner-up's cost (sorted / sdpa-kvcache at batch 16: "
                                       "$0.6667)")
    assert by_cost.lines[2].startswith("  saving: 0.42× static's cost (static / sdpa-kvcache at batch 16: $1)")
    assert by_cost.lines[3].startswith("  vs the fastest reference: 0.83× the reference's cost (ref: "
                                       "transformers-continuous")
    assert by_cost.lines[4].startswith("  priced at $3.6 per GPU-hour × 1 GPU")
    assert by_cost.summary == "continuous / sdpa-kvcache: $0.4167/M output tokens"
    unpriced = ranked_verdict(priced_generate(None), "cost")
    assert unpriced is not None and unpriced.lines[-1] == f"  {NO_PRICE}"
    assert unpriced.lines[0].startswith("verdict: winner continuous")


def test_a_kind_without_a_cost_verdict_is_ranked_by_speed_saying_why() -> None:
    from tests.unit.test_tune_plan import tune
    from tests.unit.test_tune_report import finished

    result = finished(tune())
    by_cost = ranked_verdict(result, "cost")
    by_speed = ranked_verdict(result, "speed")
    assert by_cost is not None and by_speed is not None
    assert by_cost.lines == [*by_speed.lines, "  tunes have no cost per token to rank by: ranked by speed"]
