"""`hf:NAME[:CONFIG[:SPLIT]]`: a data set on the Hugging Face Hub, and nothing else.

`datasets.load_dataset` reads whatever its first argument names: a Hub repository, but also a local directory
or file (`/etc`, `../..`, `~`) and its own packaged builders (`json`, `csv`, `text`, …). A data source written
`hf:` skips the worker's roots, so its name must be one the Hub could hold and nothing that reaches the local
file system: the server refuses any other form at submit, and the worker refuses it again before a job
starts (specs stored before this check existed, or a server of another version).

The Hub's own rules for repository names (huggingface_hub's `validate_repo_id`): `name` or `org/name`, each
part letters, digits, `-`, `_` and `.`, at most 96 characters, not starting or ending with `-` or `.`, and no
`--` or `..` inside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HUB_DATASET_PREFIX = "hf:"
HUB_DATASET_FORM = "hf:NAME[:CONFIG[:SPLIT]] with NAME a Hub data set id (name or org/name)"

_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HUB_DATASET_ID = re.compile(rf"{_HUB_PART}(?:/{_HUB_PART})?")
# A builder configuration (`wikitext-103-raw-v1`, `20231101.en`) and a split (`train`, `train+validation`).
CONFIG_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?")
SPLIT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
# The builders `datasets` packages (datasets.packaged_modules): as a bare name each reads local files, not the
# Hub. The worker also checks the list of the `datasets` it has installed, which may name more.
PACKAGED_BUILDERS = frozenset({
    "arrow", "audiofolder", "cache", "conll", "csv", "eval", "fasta", "fastq", "genbank", "generator", "harbor",
    "hdf5", "iceberg", "imagefolder", "json", "lance", "meshfolder", "mmcif", "niftifolder", "pandas", "parquet",
    "pdb", "pdffolder", "spark", "sql", "text", "tsfile", "videofolder", "vortex", "webdataset", "xml",
})


@dataclass(frozen=True)
class HubDataset:
    """A data set on the Hub as `datasets.load_dataset(name, config, split=split)` takes it."""

    name: str
    config: str | None
    split: str


def is_hub_dataset(source: str) -> bool:
    return source.startswith(HUB_DATASET_PREFIX)


def parse_hub_dataset(source: str, packaged_builders: frozenset[str] = PACKAGED_BUILDERS) -> HubDataset:
    """The Hub data set `source` names; ValueError saying why when it is not of the Hub's form, so nothing
    that could mean a local path or a packaged builder is ever handed to `datasets`."""
    parts = source.removeprefix(HUB_DATASET_PREFIX).split(":")
    if len(parts) > 3:
        raise ValueError(f"too many ':' parts; write {HUB_DATASET_FORM}")
    name, config, split = [*parts, None, None][:3]
    if not name or not HUB_DATASET_ID.fullmatch(name) or ".." in name or "--" in name:
        raise ValueError(f"{name!r} is not a Hub data set id (letters, digits, '-', '_' and '.' in name or "
                         "org/name, no '..' or '--'); a local file is written without hf: and read from the "
                         f"worker's data roots; write {HUB_DATASET_FORM}")
    if name.casefold() in packaged_builders:
        raise ValueError(f"{name!r} is one of the datasets library's file builders, which read local files, not a "
                         "Hub data set; name the file itself (without hf:) to read it from the worker's data roots")
    if config is not None and config != "" and (not CONFIG_NAME.fullmatch(config) or ".." in config):
        raise ValueError(f"config {config!r} is not a configuration name (letters, digits, '-', '_' and '.')")
    if split is not None and split != "" and not SPLIT_NAME.fullmatch(split):
        raise ValueError(f"split {split!r} is not a split name (e.g. train, validation, train+validation)")
    return HubDataset(name=name, config=config or None, split=split or "train")
