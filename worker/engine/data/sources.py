"""The job's sequences: a text source tokenized once (and cached), or synthetic lengths; then a seeded draw.

Text sources go through `datasets`, so the tokenized corpus is an Arrow file keyed by a fingerprint of
(source, tokenizer, text field): a second job on the same data maps it from disk instead of re-tokenizing.
The draw happens after the cache, so changing `num_samples`, `seed` or `max_length` reuses the same file.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from datasets.exceptions import DatasetsError
from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from padbench.contract.hub_dataset import PACKAGED_BUILDERS, HubDataset, is_hub_dataset, parse_hub_dataset
from padbench.contract.model_spec import HUB_MODEL_ID
from padbench.contract.spec import DataSpec
from padbench.worker.engine.data.synthetic import DistributionError, get_distribution
from padbench.worker.engine.hub import HubUnavailable, NotInCache, from_cache_or_hub, libraries_offline
from padbench.worker.runtime.isolation import SpecProblem
from padbench.worker.runtime.progress import ProgressFn
from padbench.worker.runtime.settings import WorkerSettings

SYNTHETIC = "synthetic"
# Local files by suffix → the `datasets` packaged builder that reads them.
FILE_BUILDERS: dict[str, str] = {
    ".txt": "text", ".raw": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv",
}
# Bump when the tokenized rows change shape or meaning, so old cache files are not reused.
TOKENIZED_FORMAT = "padbench-tokenized-v1"
# Bump when what the data digest covers changes, so digests of different definitions never compare equal.
DIGEST_FORMAT = "padbench-data-v2"


class DataError(SpecProblem):
    """Data that cannot be loaded; the message starts with the spec field at fault."""


@dataclass(frozen=True)
class TokenizedData:
    sequences: list[list[int]]  # token ids; longer lines keep their first data.max_length tokens
    pad_token_id: int
    digest: str  # sha256 of the drawn token ids and the draw's settings: the same data gives it on any machine
    source: str  # for people: what was read
    num_lines: int  # non-empty lines the draw was made from (num_samples for synthetic data)


@dataclass(frozen=True)
class TokenizedCorpus:
    """Every non-empty line of a source, tokenized, with the identities the digest is built from."""

    dataset: datasets.Dataset  # one column, `input_ids`
    tokenizer_identity: str
    description: str


def load_sequences(data: DataSpec, vocab_size: int, cache_dir: Path | None = None,
                   progress: ProgressFn | None = None) -> TokenizedData:
    report = progress or (lambda fraction, message: None)
    if data.source == SYNTHETIC:
        synthetic = synthetic_sequences(data, vocab_size)
        report(1.0, f"{len(synthetic.sequences)} synthetic sequences ready")
        return synthetic
    tokenizer = load_tokenizer(data.tokenizer or "")
    corpus = tokenize_corpus(data, tokenizer, cache_dir or WorkerSettings().datasets_cache_dir, report)
    report(0.9, f"drawing {data.num_samples} sequences")
    rows = corpus.dataset[draw_indices(len(corpus.dataset), data).tolist()]["input_ids"]
    sequences = [ids[: data.max_length] for ids in rows]
    pad_token_id = pad_id_of(tokenizer)
    check_vocabulary(sequences, pad_token_id, vocab_size, data.tokenizer or "")
    identity = {"tokenizer": corpus.tokenizer_identity}
    report(1.0, f"{len(sequences)} sequences ready")
    return TokenizedData(sequences, pad_token_id, data_digest(identity, data, sequences), corpus.description,
                         len(corpus.dataset))


# --- tokenizer -----------------------------------------------------------------------------------------

# Where a worker finds a tokenizer directory given as a path (`padbench.worker.supervisor.confine`).
LOCAL_TOKENIZER = "a local tokenizer directory under PADBENCH_MODEL_ROOTS or PADBENCH_DATA_ROOTS"


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    def load(local_files_only: bool) -> PreTrainedTokenizerBase:
        return AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)

    try:
        if not HUB_MODEL_ID.fullmatch(name) or Path(name).expanduser().is_dir():
            return load(True)  # a directory, or a path: no Hub id looks like this
        return from_cache_or_hub(f"data.tokenizer {name!r}", load, (OSError,), local=LOCAL_TOKENIZER)
    except NotInCache:
        raise  # `padbench check`: the worker's to fetch, not a refusal
    except HubUnavailable as error:  # no network, or asked not to use it: the message says what to do instead
        raise DataError(str(error)) from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        # Only the exception's type: its message may quote the files it read (a config's model_type).
        raise DataError(f"data.tokenizer: cannot load tokenizer {name!r} ({type(error).__name__}); "
                        "it must be a tokenizer directory or a hub name") from error


def tokenizer_identity(tokenizer: PreTrainedTokenizerBase) -> str:
    """A content hash, so two folders holding the same tokenizer share cache files and digests."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        serialized = backend.to_str()
    else:
        serialized = json.dumps([sorted(tokenizer.get_vocab().items()), tokenizer.all_special_tokens])
    return hashlib.sha256(serialized.encode()).hexdigest()


def pad_id_of(tokenizer: PreTrainedTokenizerBase) -> int:
    # GPT-2-style tokenizers have no pad token; padded positions are masked out, so eos serves as well.
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def check_vocabulary(sequences: list[list[int]], pad_token_id: int, vocab_size: int, tokenizer: str) -> None:
    largest = max((max(ids) for ids in sequences if ids), default=0)
    largest = max(largest, pad_token_id)
    if largest >= vocab_size:
        raise DataError(f"data.tokenizer: {tokenizer!r} produces token id {largest}, "
                        f"outside the model's vocabulary of {vocab_size}")


def _tokenizer_function(tokenizer: PreTrainedTokenizerBase, text_field: str) -> Callable[[dict], dict]:
    def tokenize(batch: dict[str, list[Any]]) -> dict[str, list[list[int]]]:
        # Blank lines (WikiText's are a single space) are dropped here: a batched map may return fewer rows.
        texts = [text for text in batch[text_field] if isinstance(text, str) and text.strip()]
        # verbose=False: lines longer than the tokenizer's model_max_length are expected; we truncate later.
        return {"input_ids": tokenizer(texts, verbose=False)["input_ids"] if texts else []}

    return tokenize


# --- text sources ----------------------------------------------------------------------------------------

def tokenize_corpus(data: DataSpec, tokenizer: PreTrainedTokenizerBase, cache_dir: Path,
                    report: ProgressFn) -> TokenizedCorpus:
    report(0.0, f"loading {data.source}")
    with _quiet_datasets():
        raw, description = read_source(data.source, cache_dir)
        if data.text_field not in raw.column_names:
            # The file's own field names are its content (a CSV header, JSON keys): not echoed.
            raise DataError(f"data.text_field: {data.source} has no field {data.text_field!r}")
        tok_identity = tokenizer_identity(tokenizer)
        fingerprint = hashlib.sha256(
            "\0".join([TOKENIZED_FORMAT, raw._fingerprint, tok_identity, data.text_field]).encode()
        ).hexdigest()
        cache_file = cache_dir / "tokenized" / f"{fingerprint}.arrow"
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        verb = "reading cached tokens for" if cache_file.exists() else "tokenizing"
        report(0.1, f"{verb} {len(raw)} lines")
        tokenized = raw.map(_tokenizer_function(tokenizer, data.text_field), batched=True,
                            remove_columns=raw.column_names, new_fingerprint=fingerprint,
                            cache_file_name=str(cache_file), load_from_cache_file=True)
    if len(tokenized) == 0:
        raise DataError(f"data.source: {data.source} has no non-empty lines in field {data.text_field!r}")
    return TokenizedCorpus(tokenized, tok_identity,
                           f"{description}, {len(tokenized):,} non-empty lines")


def read_source(source: str, cache_dir: Path) -> tuple[datasets.Dataset, str]:
    if is_hub_dataset(source):
        return read_hub_dataset(source)
    suffix = Path(source).suffix.lower()
    builder = FILE_BUILDERS.get(suffix)
    if builder is None:
        known = ", ".join(sorted(FILE_BUILDERS))
        raise DataError(f"data.source: unknown file type {suffix or '(no suffix)'!r} for {source!r} "
                        f"(known: {known}, or hf:NAME[:CONFIG[:SPLIT]], or synthetic)")
    files = sorted(glob.glob(os.path.expanduser(source)))
    if not files:
        raise DataError(f"data.source: no file matches {source!r}")
    try:
        raw = datasets.load_dataset(builder, data_files=files, split="train", cache_dir=str(cache_dir / "raw"))
    except (OSError, ValueError, DatasetsError) as error:
        raise DataError(f"data.source: cannot read {source!r} as {builder} ({type(error).__name__})") from error
    return raw, f"{source} ({builder}, {len(files)} file{'s' * (len(files) > 1)})"


def read_hub_dataset(source: str) -> tuple[datasets.Dataset, str]:
    """`hf:NAME[:CONFIG[:SPLIT]]`, split defaulting to train. Hub data stays in the Hugging Face cache, which is read
    first; the Hub is asked only for data not there (`padbench.worker.engine.hub`)."""
    hub = hub_dataset(source)

    def load(cached_only: bool) -> datasets.Dataset:
        with libraries_offline() if cached_only else nullcontext():
            return datasets.load_dataset(hub.name, hub.config, split=hub.split)

    try:
        raw = from_cache_or_hub(f"data.source {source!r}", load, (OSError, ValueError, DatasetsError),
                                local="a local copy of its files as data.source (.parquet, .jsonl, .csv or .txt)")
    except HubUnavailable as error:  # no network, or asked not to use it: the message says what to do instead
        raise DataError(str(error)) from None
    except (OSError, ValueError, DatasetsError) as error:
        offline = " (the hub is offline: only datasets already in the local cache load)" if _hub_offline() else ""
        raise DataError(f"data.source: cannot load Hugging Face dataset {source!r}{offline}: {error}") from error
    return raw, f"{source} (Hugging Face dataset)"


def hub_dataset(source: str) -> HubDataset:
    """The Hub data set `source` names, refused when `datasets` would read it from the local file system instead:
    a name outside the Hub's form, one of the builders this `datasets` packages, or a name that exists as a path
    in the working directory (which `load_dataset` prefers to the Hub)."""
    try:
        hub = parse_hub_dataset(source, PACKAGED_BUILDERS | frozenset(_PACKAGED_DATASETS_MODULES))
    except ValueError as error:
        raise DataError(f"data.source: {error}") from None
    if os.path.lexists(hub.name):
        raise DataError(f"data.source: {hub.name!r} is also a path in the working directory, which datasets would "
                        "read instead of the Hub; write the path without hf: to read the local copy")
    return hub


def _hub_offline() -> bool:
    return any(os.environ.get(flag, "").lower() in {"1", "true", "yes"}
               for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """datasets draws tqdm bars on stderr; the job reports progress through its own callback instead."""
    were_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if not were_disabled:
            datasets.enable_progress_bars()


# --- drawing -------------------------------------------------------------------------------------------------

def draw_indices(available: int, data: DataSpec) -> np.ndarray:
    rng = np.random.default_rng(data.seed)
    if data.with_replacement:
        return rng.integers(0, available, size=data.num_samples)
    if data.num_samples > available:
        raise DataError(f"data.num_samples: {data.num_samples} sequences asked without replacement, "
                        f"but the source has only {available} non-empty lines")
    return rng.permutation(available)[: data.num_samples]


def data_digest(identity: dict[str, Any], data: DataSpec, sequences: list[list[int]]) -> str:
    """What was measured: the drawn sequences' token ids (and so their lengths), with the draw's settings.

    Nothing about where the text came from goes in — no path, no modification time, no `datasets`
    fingerprint (which follows both) — so the same sequences give the same digest on any machine, and two
    results with one digest measured the same data.
    """
    header = {"format": DIGEST_FORMAT, **identity, "max_length": data.max_length, "seed": data.seed,
              "num_samples": data.num_samples, "with_replacement": data.with_replacement}
    digest = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    digest.update(np.asarray([len(ids) for ids in sequences], dtype=np.int64).tobytes())
    for ids in sequences:
        digest.update(np.asarray(ids, dtype=np.int64).tobytes())
    return digest.hexdigest()


# --- synthetic -------------------------------------------------------------------------------------------------

def synthetic_sequences(data: DataSpec, vocab_size: int) -> TokenizedData:
    """Lengths from the named distribution; ids uniform over the vocabulary minus special ids.

    Without a tokenizer the only special id known is the pad id 0; with one, all its special ids are left out.
    """
    try:
        distribution = get_distribution(data.distribution)
    except DistributionError as error:
        raise DataError(f"data.distribution: {error}") from None
    pad_token_id, special_ids = 0, [0]
    if data.tokenizer is not None:
        tokenizer = load_tokenizer(data.tokenizer)
        pad_token_id, special_ids = pad_id_of(tokenizer), list(tokenizer.all_special_ids)
    allowed = np.setdiff1d(np.arange(vocab_size), special_ids)
    rng = np.random.default_rng(data.seed)
    lengths = distribution.sample(rng, data.num_samples, data.max_length)
    tokens = allowed[rng.integers(0, len(allowed), size=int(lengths.sum()))]
    sequences = [chunk.tolist() for chunk in np.split(tokens, np.cumsum(lengths)[:-1])]
    check_vocabulary(sequences, pad_token_id, vocab_size, data.tokenizer or "")
    identity = {"source": f"synthetic:{distribution.name}", "vocab_size": vocab_size,
                "special_ids": sorted(int(i) for i in special_ids)}
    return TokenizedData(sequences, pad_token_id, data_digest(identity, data, sequences),
                         f"synthetic lengths ({distribution.name})", data.num_samples)
