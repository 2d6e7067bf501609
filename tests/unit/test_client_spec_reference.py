"""The spec reference in docs/ is generated from the contract's JSON Schema and must match it."""

from __future__ import annotations

from pathlib import Path

from padbench.client.spec_reference import describe_type, render_reference

REFERENCE = Path(__file__).parents[2] / "docs" / "spec-reference.md"


def test_docs_spec_reference_is_up_to_date() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == render_reference(), (
        "docs/spec-reference.md is stale: padbench schema --format markdown > docs/spec-reference.md")


def test_types_read_as_words() -> None:
    assert describe_type({"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"const": "auto"}]}) == \
        'integer (> 0) or `"auto"`'
    assert describe_type({"type": "array", "items": {"$ref": "#/$defs/StrategySpec"}, "minItems": 1}) == \
        "list of [StrategySpec](#strategyspec) (≥ 1 items)"
    assert describe_type({"enum": ["bf16", "fp16"]}) == "one of `bf16`, `fp16`"
