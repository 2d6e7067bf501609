"""The attention example specs stay valid as the contract evolves."""

from __future__ import annotations

from pathlib import Path

import pytest

from padbench.kinds.attention.contract import AttentionJobSpec
from padbench.specfile import load_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("attention-*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_is_a_valid_attention_spec(path: Path) -> None:
    assert isinstance(load_spec(path), AttentionJobSpec)


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3
