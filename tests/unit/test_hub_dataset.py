"""`hf:` data sources name Hub data sets only: every form that could reach the local file system or one of
`datasets`' file builders is refused by the contract (422 at submit), by the worker before a child starts,
and by the data loader before `datasets` sees it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from padbench.contract.hub_dataset import HubDataset, parse_hub_dataset
from padbench.contract.spec import DataSpec
from padbench.worker.engine.data.sources import DataError, hub_dataset
from padbench.worker.supervisor.specs import SpecRefused, job_spec

# Each one a way `datasets.load_dataset` could be led to a local path or a local-file builder.
LOCAL_ESCAPES = [
    "hf:/etc", "hf:/etc/passwd", "hf:../..", "hf:../../etc", "hf:..", "hf:.", "hf:./data", "hf:~", "hf:~root",
    "hf:~/data", "hf:org/../..", "hf:org/name/../../x", "hf:a/b/c", "hf:a//b", "hf:/", "hf:C:\\Windows",
    "hf:\\\\server\\share", "hf:org\\name", "hf:.hidden", "hf:name.", "hf:-name", "hf:a..b", "hf:a--b",
    "hf:json", "hf:CSV", "hf:text:default:train", "hf:parquet", "hf:org/name:../x", "hf:name:cfg:../x",
    "hf:name:/etc:train", "hf:name:cfg:train:extra", "hf:", "hf::config", "hf:name with space",
]
HUB_FORMS = {
    "hf:wikitext": HubDataset("wikitext", None, "train"),
    "hf:Salesforce/wikitext:wikitext-103-raw-v1": HubDataset("Salesforce/wikitext", "wikitext-103-raw-v1", "train"),
    "hf:wikimedia/wikipedia:20231101.en:validation": HubDataset("wikimedia/wikipedia", "20231101.en", "validation"),
    "hf:org/name::train+test": HubDataset("org/name", None, "train+test"),
}


@pytest.mark.parametrize("source", LOCAL_ESCAPES)
def test_a_local_escape_through_a_hub_looking_name_is_refused_by_the_contract(source: str) -> None:
    with pytest.raises(ValidationError) as refused:
        DataSpec(source=source, tokenizer="org/tokenizer")
    assert [error["loc"] for error in refused.value.errors()] == [("source",)]


@pytest.mark.parametrize("source", LOCAL_ESCAPES)
def test_the_worker_refuses_a_lease_carrying_it_before_any_child(source: str) -> None:
    document = {"kind": "padding", "data": {"source": source, "tokenizer": "org/tokenizer"}, "model": "tiny"}
    with pytest.raises(SpecRefused, match=r"^spec: data\.source: "):
        job_spec(document)


@pytest.mark.parametrize("source", LOCAL_ESCAPES)
def test_the_data_loader_refuses_it_before_datasets_sees_it(source: str) -> None:
    with pytest.raises(DataError, match=r"^data\.source: "):
        hub_dataset(source)


@pytest.mark.parametrize(("source", "expected"), HUB_FORMS.items())
def test_hub_ids_with_config_and_split_are_read_as_the_hub_names_them(source: str, expected: HubDataset) -> None:
    assert parse_hub_dataset(source) == expected
    assert DataSpec(source=source, tokenizer="org/tokenizer").source == source


def test_a_hub_name_that_is_also_a_path_in_the_working_directory_is_refused(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # load_dataset prefers a local directory of the same name to the Hub.
    (tmp_path / "org" / "name").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="also a path in the working directory"):
        hub_dataset("hf:org/name")
    assert hub_dataset("hf:org/other") == HubDataset("org/other", None, "train")


def test_every_file_builder_of_the_installed_datasets_is_refused() -> None:
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES

    for builder in _PACKAGED_DATASETS_MODULES:
        with pytest.raises(DataError, match="file builders"):
            hub_dataset(f"hf:{builder}")
