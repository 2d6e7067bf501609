"""`--set` and `--sweep`: values read as YAML, applied before validation, a job per point of the product,
and every mistake refused with the option and the nearest key named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from padbench.contract.bounds import MAX_NAME_LENGTH
from padbench.spec_overrides import MAX_POINTS, expand, point_name, split_top_level, yaml_value
from padbench.specfile import SpecError

DOCUMENT: dict[str, Any] = {"name": "tiny", "device": "cpu", "dtype": "fp32", "attention": "sdpa",
                            "strategies": ["static", {"name": "packed"}]}


def points(sets: list[str] = [], sweeps: list[str] = [], document: dict[str, Any] = DOCUMENT) -> list[Any]:  # noqa: B006
    return expand(Path("spec.yaml"), document, sets, sweeps)


def refusal(sets: list[str] = [], sweeps: list[str] = []) -> str:  # noqa: B006
    with pytest.raises(SpecError) as raised:
        points(sets, sweeps)
    return str(raised.value)


def test_values_are_yaml_scalars_and_flow_collections() -> None:
    assert [yaml_value(text) for text in ("5", "auto", "0.5", "true", "[static, packed]", "{a: 1}", "")] == [
        5, "auto", 0.5, True, ["static", "packed"], {"a": 1}, ""]
    assert yaml_value("[unclosed") == "[unclosed"
    assert split_top_level("a,[b,c],{d: 1, e: 2}") == ["a", "[b,c]", "{d: 1, e: 2}"]


def test_sets_change_the_document_before_it_is_checked() -> None:
    [point] = points(["measurement.repeats=5", "batch_size=16", "strategies=[static,dynamic]",
                      "strategies.1={name: binned, n_bins: 4}"])
    spec = point.spec
    assert point.label == "" and spec.name == "tiny"
    assert spec.measurement.repeats == 5 and spec.batch_size == 16
    assert [(s.name, s.n_bins) for s in spec.strategies] == [("static", None), ("binned", 4)]
    assert DOCUMENT["strategies"] == ["static", {"name": "packed"}]  # the loaded document is left as it was


def test_a_set_below_a_free_form_key_and_into_a_list_item() -> None:
    [point] = points(["model.config.n_layer=3", "model.config.vocab_size=512", "strategies.1.name=dynamic"],
                     document=DOCUMENT | {"model": {"config": {"model_type": "gpt2"}}})
    assert point.spec.model.config == {"model_type": "gpt2", "n_layer": 3, "vocab_size": 512}
    assert point.spec.strategies[1].name == "dynamic"


def test_sweeps_make_the_cartesian_product_each_point_named() -> None:
    made = points(["measurement.repeats=1", "probe.cpu_memory_budget_bytes=1000000000"],
                  ["batch_size=4,8,auto", "dtype=fp32,bf16"])
    assert len(made) == 6
    assert [p.label for p in made[:2]] == ["batch_size=4,dtype=fp32", "batch_size=4,dtype=bf16"]
    assert made[4].spec.name == "tiny[batch_size=auto,dtype=fp32]" and made[4].spec.batch_size == "auto"
    assert {p.spec.measurement.repeats for p in made} == {1}


def test_a_sweep_of_lists_keeps_each_list_whole() -> None:
    made = points(sweeps=["strategies=[static],[static,packed]"])
    assert [len(p.spec.strategies) for p in made] == [1, 2]


def test_a_spec_without_a_name_names_points_after_its_file() -> None:
    made = points(sweeps=["batch_size=1,2"], document={k: v for k, v in DOCUMENT.items() if k != "name"})
    assert made[0].spec.name == "spec[batch_size=1]"


def test_point_names_stay_within_the_name_limit() -> None:
    assert len(point_name("n" * 300, "batch_size=8")) == MAX_NAME_LENGTH
    assert point_name("n" * 300, "batch_size=8").endswith("n[batch_size=8]")
    long_label = point_name("n", "x" * 400)
    assert len(long_label) == MAX_NAME_LENGTH and long_label.endswith("…]")


def test_unknown_keys_are_refused_with_the_nearest_key() -> None:
    assert refusal(["measurment.repeats=5"]) == ("--set measurment.repeats: no key 'measurment' in a padding spec "
                                                 "(did you mean 'measurement'?)")
    assert "(did you mean 'measurement.repeats'?)" in refusal(["repeats=5"])
    assert "no key 'repeat' in measurement" in refusal(["measurement.repeat=5"])
    assert refusal(sweeps=["batch_sise=1,2"]).startswith("--sweep batch_sise: no key 'batch_sise'")


def test_malformed_options_and_bad_values_are_refused_in_the_users_words() -> None:
    assert "write KEY=VALUE" in refusal(["measurement.repeats"])
    assert "names joined by dots" in refusal(["measurement..repeats=1"])
    assert "none empty" in refusal(sweeps=["batch_size=4,,8"])
    assert "names a key twice: batch_size" in refusal(sweeps=["batch_size=4", "batch_size=8"])
    assert "not an item of the spec's list of 2" in refusal(["strategies.5.name=static"])
    assert "strategies.0 is 'static' in the spec, not a mapping" in refusal(["strategies.0.name=packed"])
    message = refusal(sweeps=["dtype=fp32,fp33"])
    assert message.startswith("spec.yaml [dtype=fp33]: dtype: 'fp33' is not one of") and "Error" not in message


def test_too_many_points_are_refused_before_any_is_built() -> None:
    values = ",".join(str(size) for size in range(1, 18))
    message = refusal(sweeps=[f"batch_size={values}", f"data.seed={values}"])
    assert message == f"the sweeps make 289 jobs; at most {MAX_POINTS} at once (sweep fewer values)"
