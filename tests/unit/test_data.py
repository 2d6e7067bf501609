"""Loading the job's sequences: text files of every supported type, the tokenization cache, draws, errors."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest

from padbench.contract.spec import DataSpec
from padbench.worker.engine.data import sources as data_module
from padbench.worker.engine.data.sources import DataError, TokenizedData, load_sequences
from tests.conftest import CLS_ID, PAD_ID, SEP_ID, SPECIAL_TOKENS

VOCAB = 30522
LINES = [
    " = Valkyria Chronicles III = ",
    "Senjō no Valkyria 3 : Unrecorded Chronicles is a tactical role @-@ playing video game .",
    "The game began development in 2010 , carrying over a large portion of the work done on its predecessor .",
    "It met with positive sales in Japan , and was praised by both Japanese and western critics .",
    " = = Gameplay = = ",
]


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    # WikiText's layout: blank lines hold a single space, and they must not become sequences.
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(line for text in LINES for line in (" ", text)) + "\n \n", encoding="utf-8")
    return path


def write_in_format(suffix: str, directory: Path) -> Path:
    path = directory / f"corpus{suffix}"
    rows = [{"id": index, "body": text} for index, text in enumerate(LINES)]
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["id", "body"])
            writer.writeheader()
            writer.writerows(rows)
    else:
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def load(source: Path | str, tokenizer: Path | str, cache: Path, **fields: object) -> TokenizedData:
    spec = DataSpec(source=str(source), tokenizer=str(tokenizer), **{"num_samples": len(LINES),
                                                                        "with_replacement": False, **fields})
    return load_sequences(spec, VOCAB, cache_dir=cache)


def test_text_file_keeps_non_empty_lines_with_special_tokens(text_file: Path, tokenizer_dir: Path,
                                                             tmp_path: Path) -> None:
    loaded = load(text_file, tokenizer_dir, tmp_path / "cache")
    assert loaded.num_lines == len(LINES)
    assert loaded.pad_token_id == PAD_ID
    assert all(ids[0] == CLS_ID and ids[-1] == SEP_ID for ids in loaded.sequences)  # [CLS] … [SEP]
    assert sorted(len(ids) for ids in loaded.sequences) == sorted(
        len(ids) for ids in load(text_file, tokenizer_dir, tmp_path / "other-cache").sequences)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_structured_files_read_the_text_field(suffix: str, text_file: Path, tokenizer_dir: Path,
                                              tmp_path: Path) -> None:
    from_text = load(text_file, tokenizer_dir, tmp_path / "cache")
    structured = load(write_in_format(suffix, tmp_path), tokenizer_dir, tmp_path / "cache", text_field="body")
    assert structured.sequences == from_text.sequences


def test_long_lines_are_truncated_to_max_length(text_file: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    loaded = load(text_file, tokenizer_dir, tmp_path / "cache", max_length=8)
    assert max(len(ids) for ids in loaded.sequences) == 8
    assert min(len(ids) for ids in loaded.sequences) >= 2


def test_draws_are_seeded_and_the_digest_tracks_what_was_drawn(text_file: Path, tokenizer_dir: Path,
                                                               tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = load(text_file, tokenizer_dir, cache, num_samples=50, with_replacement=True, seed=3)
    again = load(text_file, tokenizer_dir, cache, num_samples=50, with_replacement=True, seed=3)
    other_seed = load(text_file, tokenizer_dir, cache, num_samples=50, with_replacement=True, seed=4)
    shorter = load(text_file, tokenizer_dir, cache, num_samples=50, with_replacement=True, seed=3, max_length=8)
    assert len(first.sequences) == 50
    assert (first.sequences, first.digest) == (again.sequences, again.digest)
    assert len({first.digest, other_seed.digest, shorter.digest}) == 3


def test_the_digest_identifies_the_data_not_the_file(text_file: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """The same text copied elsewhere (another path, another time, a fresh cache: another machine) measures
    the same sequences, so it carries the same digest; other text does not."""
    copy = tmp_path / "elsewhere" / "copy-of-corpus.txt"
    copy.parent.mkdir()
    shutil.copyfile(text_file, copy)
    os.utime(copy, (1_000_000_000, 1_000_000_000))
    draw = {"num_samples": 40, "with_replacement": True, "seed": 5}
    original = load(text_file, tokenizer_dir, tmp_path / "cache-a", **draw)
    copied = load(copy, tokenizer_dir, tmp_path / "cache-b", **draw)
    assert copied.sequences == original.sequences
    assert copied.digest == original.digest
    edited = tmp_path / "edited.txt"
    edited.write_text(text_file.read_text(encoding="utf-8").replace("the", "a"), encoding="utf-8")
    assert load(edited, tokenizer_dir, tmp_path / "cache-c", **draw).digest != original.digest


def test_second_load_reads_the_cache_instead_of_tokenizing(text_file: Path, tokenizer_dir: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = load(text_file, tokenizer_dir, cache)
    assert list((cache / "tokenized").glob("*.arrow"))

    def tokenizing_fails(*args: object) -> Callable[[dict], dict]:
        def tokenize(batch: dict) -> dict:
            raise AssertionError("the tokenized cache was not used")

        return tokenize

    monkeypatch.setattr(data_module, "_tokenizer_function", tokenizing_fails)
    second = load(text_file, tokenizer_dir, cache, seed=9)  # a new draw reuses the same tokenized file
    assert sorted(second.sequences) == sorted(first.sequences)
    changed = text_file.parent / "changed.txt"
    changed.write_text("a different line\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="cache was not used"):  # new data is tokenized, not served stale
        load(changed, tokenizer_dir, cache, num_samples=1)


def test_progress_is_reported_up_to_completion(text_file: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    seen: list[tuple[float, str]] = []
    spec = DataSpec(source=str(text_file), tokenizer=str(tokenizer_dir), num_samples=3)
    load_sequences(spec, VOCAB, cache_dir=tmp_path, progress=lambda fraction, message: seen.append((fraction,
                                                                                                     message)))
    fractions = [fraction for fraction, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_synthetic_sequences_avoid_special_ids(tokenizer_dir: Path) -> None:
    plain = load_sequences(DataSpec(num_samples=400, max_length=64, seed=1), VOCAB)
    assert plain.pad_token_id == 0 and plain.num_lines == 400
    assert all(2 <= len(ids) <= 64 and 0 not in ids for ids in plain.sequences)
    with_tokenizer = load_sequences(DataSpec(num_samples=400, tokenizer=str(tokenizer_dir)), VOCAB)
    assert not set(range(len(SPECIAL_TOKENS))) & {token for ids in with_tokenizer.sequences for token in ids}
    assert plain.digest == load_sequences(DataSpec(num_samples=400, max_length=64, seed=1), VOCAB).digest


@pytest.mark.parametrize(("fields", "field", "reason"), [
    ({"source": "/nonexistent/corpus.txt"}, "data.source", "no file matches"),
    ({"source": "corpus.xml"}, "data.source", "unknown file type"),
    ({"source": "hf:wikitext:no-such-config-here:train"}, "data.source", "HF_HUB_OFFLINE is set"),
    ({"text_field": "body"}, "data.text_field", "no field 'body'"),
    ({"num_samples": 6, "with_replacement": False}, "data.num_samples", "only 5 non-empty lines"),
    ({"tokenizer": "/nonexistent/tokenizer"}, "data.tokenizer", "cannot load"),
])
def test_bad_data_is_refused_naming_the_field(fields: dict[str, object], field: str, reason: str, text_file: Path,
                                             tokenizer_dir: Path, tmp_path: Path) -> None:
    spec = DataSpec(**{"source": str(text_file), "tokenizer": str(tokenizer_dir), **fields})
    with pytest.raises(DataError, match=reason) as caught:
        load_sequences(spec, VOCAB, cache_dir=tmp_path)
    assert str(caught.value).startswith(field)


def test_unknown_distribution_and_small_vocabulary_are_refused(text_file: Path, tokenizer_dir: Path,
                                                               tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^data\.distribution: .*known: fixed, uniform, wikitext103-bert"):
        load_sequences(DataSpec(distribution="zipf:2"), VOCAB)
    spec = DataSpec(source=str(text_file), tokenizer=str(tokenizer_dir), num_samples=5)
    with pytest.raises(DataError, match=r"^data\.tokenizer: .*outside the model's vocabulary of 10\b"):
        load_sequences(spec, vocab_size=10, cache_dir=tmp_path)


def test_errors_about_a_file_never_quote_its_content(tmp_path: Path, tokenizer_dir: Path) -> None:
    private = tmp_path / "private.csv"
    private.write_text("password_column,api_key_column\nhunter2,abc\n")
    spec = DataSpec(source=str(private), tokenizer=str(tokenizer_dir), text_field="nope")
    with pytest.raises(DataError) as caught:
        load_sequences(spec, VOCAB, cache_dir=tmp_path / "cache")
    assert "password_column" not in str(caught.value) and "api_key" not in str(caught.value)
    config_dir = tmp_path / "not-a-tokenizer"
    config_dir.mkdir()
    (config_dir / "config.json").write_text('{"model_type": "secret-internal-arch"}')
    with pytest.raises(DataError) as caught:
        load_sequences(DataSpec(source=str(private), tokenizer=str(config_dir)), VOCAB, cache_dir=tmp_path / "c")
    assert "secret-internal-arch" not in str(caught.value)
