"""TRL's packing names in a padding spec: each combination's layout, what the result says, the refusals."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from padbench.contract.results import Environment
from padbench.kinds.padding.contract import PaddingJobSpec, PaddingResult
from padbench.kinds.padding.report import render_table

MAPPED: list[tuple[dict[str, Any], str]] = [
    ({}, "dynamic"),
    ({"packing": False, "pad_to_multiple_of": 64}, "dynamic[×64]"),
    ({"packing": True}, "packed"),
    ({"packing": True, "packing_strategy": "bfd"}, "packed"),
    ({"packing": True, "packing_strategy": "bfd", "padding_free": True}, "packed"),
    ({"padding_free": True}, "packed"),
    ({"packing": True, "packing_strategy": "wrapped"}, "wrapped"),
]


@pytest.mark.parametrize(("trl", "label"), MAPPED)
def test_each_combination_runs_as_its_layout_and_reads_back_unchanged(trl: dict[str, Any], label: str) -> None:
    spec = PaddingJobSpec.model_validate({"trl": trl})
    assert [strategy.label for strategy in spec.strategies] == [label]
    assert PaddingJobSpec.model_validate(spec.model_dump(mode="json")) == spec  # stored and read back: not added twice
    assert spec.trl is not None and f" → {label.split('[')[0]}: " in spec.trl.mapping()


def test_the_trl_layout_joins_the_strategies_listed_unless_already_there() -> None:
    beside = PaddingJobSpec.model_validate({"trl": {"packing": True, "packing_strategy": "wrapped"},
                                            "strategies": ["static", "packed"]})
    assert [strategy.label for strategy in beside.strategies] == ["static", "packed", "wrapped"]
    listed = PaddingJobSpec.model_validate({"trl": {"padding_free": True}, "strategies": ["static", "packed"]})
    assert [strategy.label for strategy in listed.strategies] == ["static", "packed"]


def test_the_result_header_states_what_the_trl_names_ran_as() -> None:
    spec = PaddingJobSpec.model_validate({"trl": {"packing": True}, "strategies": ["static"]})
    environment = Environment(hostname="box", device="cpu", python="3.12", torch="2.13.0",
                              started_at="2026-11-25T12:00:00+00:00")
    result = PaddingResult(spec=spec, environment=environment, model_parameters=1, flops_per_token=1.0,
                           num_sequences=1, real_tokens_total=1, strategies=[])
    assert "TRL packing: true → packed: First-Fit-Decreasing packs" in render_table(result)


@pytest.mark.parametrize(("trl", "message"), [
    ({"packing_strategy": "bfd"}, "packing_strategy bfd applies only with packing: true"),
    ({"packing": True, "packing_strategy": "wrapped", "padding_free": True}, "padding_free restarts positions"),
    ({"packing": True, "pad_to_multiple_of": 64}, "these settings run as packed, whose rows are not padded"),
    ({"packing": True, "packing_strategy": "wrapped", "pad_to_multiple_of": 8}, "run as wrapped"),
    ({"packing": True, "packing_strategy": "ffd"}, "Input should be 'bfd' or 'wrapped'"),
    ({"packing_free": True}, "Extra inputs"),
])
def test_contradictions_are_refused_naming_the_block(trl: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        PaddingJobSpec.model_validate({"trl": trl})
    [error] = raised.value.errors()
    assert error["loc"][0] == "trl" and message in error["msg"]


def test_pad_to_multiple_of_is_for_padded_layouts_and_the_models_positions() -> None:
    with pytest.raises(ValidationError, match="pad_to_multiple_of applies only to the padded strategies"):
        PaddingJobSpec.model_validate({"strategies": [{"name": "packed", "pad_to_multiple_of": 8}]})
    with pytest.raises(ValidationError, match=r"static\[×96\]: max_length 1000 padded to a multiple of 96 exceeds"):
        PaddingJobSpec.model_validate({"model": "gpt2", "data": {"max_length": 1000},
                                       "strategies": [{"name": "static", "pad_to_multiple_of": 96}]})
