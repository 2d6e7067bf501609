"""Shared fixtures. The real corpus and tokenizer come from ../shared/data beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
WIKITEXT_DIR = SHARED_DATA / "wikitext"
TOKENIZER_DIR = SHARED_DATA / "bert-base-uncased"


def pytest_configure(config: pytest.Config) -> None:
    """Nothing in the tests may reach the Hugging Face hub. Set before any test module is collected,
    because transformers and datasets read these when they are first imported."""
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(flag, "1")


@pytest.fixture(scope="session")
def wikitext_file() -> Path:
    path = WIKITEXT_DIR / "wiki.valid.raw"
    if not path.exists():
        pytest.fail(f"the offline corpus is missing: {path} (../shared must sit beside the checkout)")
    return path


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    if not TOKENIZER_DIR.exists():
        pytest.fail(f"the offline tokenizer is missing: {TOKENIZER_DIR}")
    return TOKENIZER_DIR


@pytest.fixture(scope="session")
def wikitext_corpus(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path):
    """All 5,982 non-empty lines of the three WikiText files under bert-base-uncased, each exactly once.

    Tokenized once per session through the engine's own loader (padbench.worker.engine.data.load_sequences).
    """
    from padbench.contract.spec import DataSpec
    from padbench.worker.engine.data import load_sequences

    data = DataSpec(source=str(WIKITEXT_DIR / "wiki.*.raw"), tokenizer=str(tokenizer_dir), max_length=640,
                    num_samples=5982, with_replacement=False)
    return load_sequences(data, vocab_size=30522, cache_dir=tmp_path_factory.mktemp("datasets-cache"))
