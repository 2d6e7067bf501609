"""Shared fixtures, all from inside the repository: a small corpus written for the tests, a tokenizer
trained on it at the start of the session, and the token lengths of a real corpus (tests/fixtures/)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
# Prose in WikiText's layout (` = Title = ` headings, blank lines holding one space), written for the tests.
CORPUS_FILE = FIXTURES / "corpus.txt"
# Token lengths of every non-empty line of the WikiText-2 raw validation and test splits and the first 18
# articles of its train split, under bert-base-uncased: the corpus `wikitext103-bert` was fitted on.
WIKITEXT_LENGTHS_FILE = FIXTURES / "wikitext2-bert-lengths.txt"

# The test tokenizer's special tokens, BERT's names at the ids below (a [CLS] … [SEP] frame on every line).
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(SPECIAL_TOKENS))
# Larger than the corpus needs, so every word of it becomes a whole token.
TOKENIZER_VOCAB_LIMIT = 4000
KERNEL_SPEEDS_VARIABLE = "PADBENCH_KERNEL_SPEEDS_FILE"


def pytest_configure(config: pytest.Config) -> None:
    """Nothing in the tests may reach the Hugging Face hub. Set before any test module is collected,
    because transformers and datasets read these when they are first imported."""
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(flag, "1")
    # The jobs the tests run never read or feed the user's table of kernel speeds (`attention: auto`), nor a
    # table an earlier test fed: servers and workers a module starts get the session's empty one.
    os.environ[KERNEL_SPEEDS_VARIABLE] = str(Path(tempfile.mkdtemp(prefix="padbench-tests-")) / "kernel-speeds.json")


@pytest.fixture(autouse=True)
def own_kernel_speeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's jobs start from an empty table of kernel speeds: what another test measured picks nothing."""
    monkeypatch.setenv(KERNEL_SPEEDS_VARIABLE, str(tmp_path / "kernel-speeds.json"))


def build_tokenizer(corpus: Path, folder: Path) -> Path:
    """A lower-casing WordPiece tokenizer in BERT's style, trained on `corpus`, saved as transformers saves one."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=TOKENIZER_VOCAB_LIMIT, special_tokens=list(SPECIAL_TOKENS))
    backend.train([str(corpus)], trainer)
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", CLS_ID), ("[SEP]", SEP_ID)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def corpus_file() -> Path:
    return CORPUS_FILE


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tokenizer(CORPUS_FILE, tmp_path_factory.mktemp("tokenizer"))


def read_length_counts(path: Path) -> dict[int, int]:
    pairs = (line.split() for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
    return {int(length): int(count) for length, count in pairs}


@pytest.fixture(scope="session")
def wikitext_lengths() -> np.ndarray:
    """All 5,982 token lengths of the WikiText files, each line once, in a seeded random order."""
    counts = read_length_counts(WIKITEXT_LENGTHS_FILE)
    lengths = np.repeat(np.fromiter(counts, dtype=np.int64), list(counts.values()))
    return np.random.default_rng(0).permutation(lengths)


@pytest.fixture
def supervised_kind() -> Iterator[None]:
    """The `supervised` test kind registered, for tests whose leases carry its specs (tests/supervised_kind/)."""
    from tests.supervised_kind import registered

    with registered():
        yield
