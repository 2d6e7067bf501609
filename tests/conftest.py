"""Shared fixtures. The real corpus and tokenizer come from ../shared/data beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing in the tests may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
WIKITEXT_DIR = SHARED_DATA / "wikitext"
TOKENIZER_DIR = SHARED_DATA / "bert-base-uncased"


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
