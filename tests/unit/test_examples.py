"""Every example spec in examples/ validates against the shared contract (a typo there is a user's first error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from padbench.specfile import load_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert {path.name for path in EXAMPLES} >= {"cpu-demo.yaml", "gpu-demo.yaml", "h200-padding.yaml", "generate.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_example_spec_validates(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name
