"""The tests, the code and the docs need nothing beside the checkout: a fresh clone anywhere runs them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ("README.md", ".ci", "client", "docker", "docs", "examples", "padbench", "scripts", "server", "tests",
            "worker")
# A data folder beside the checkout: `shared` under the parent folder, written as a relative path, as
# `shared` then `data`, or joined from quoted parts in code. Built from pieces, so that this file does
# not match itself.
OUTSIDE_DATA = re.compile("|".join([r"\.\./" + "shared", "shared" + "/data", '"shared"' + r'\s*/\s*"data"']))


def text_files() -> Iterator[Path]:
    for name in SEARCHED:
        top = REPO_ROOT / name
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                yield path


def test_nothing_refers_to_data_beside_the_checkout() -> None:
    offending = []
    for path in text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # images and other binaries
        if OUTSIDE_DATA.search(text):
            offending.append(str(path.relative_to(REPO_ROOT)))
    assert offending == []


def test_the_test_fixtures_are_in_the_repository() -> None:
    from tests.conftest import CORPUS_FILE, WIKITEXT_LENGTHS_FILE

    for path in (CORPUS_FILE, WIKITEXT_LENGTHS_FILE):
        assert path.is_relative_to(REPO_ROOT / "tests") and path.is_file()
