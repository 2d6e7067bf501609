"""Service jobs read files only inside the worker's roots: every escape is refused before anything is opened,
with one message for missing and escaping names, and the job runs on the resolved real paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from padbench.contract.kinds import parse_job_spec
from padbench.contract.spec import JobSpecBase
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.worker.supervisor.confine import PathRefused, confine_spec_paths


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, models, outside = tmp_path / "data", tmp_path / "models", tmp_path / "outside"
    for directory in (data, models, outside, models / "gpt2-small"):
        directory.mkdir()
    (data / "corpus.txt").write_text("hello\n")
    (outside / "secret.txt").write_text("root:x:0:0\n")
    (data / "innocent.txt").symlink_to(outside / "secret.txt")
    (data / "linked-dir").symlink_to(outside)
    return data, models, outside


def spec(source: str = "synthetic", tokenizer: str | None = None, model_path: str | None = None) -> JobSpecBase:
    model = {"path": model_path} if model_path else {"preset": "tiny"}
    return parse_job_spec({"kind": "padding", "data": {"source": source, "tokenizer": tokenizer}, "model": model})


ESCAPES = ["../outside/secret.txt", "innocent.txt", "linked-dir/secret.txt", "/etc/passwd", "~/secret.txt",
           "missing.txt", "corpus.txt/../../outside/secret.txt"]


@pytest.mark.parametrize("name", ESCAPES)
def test_every_escape_and_a_missing_file_are_refused_alike(roots: tuple[Path, Path, Path], name: str) -> None:
    data, models, _ = roots
    with pytest.raises(PathRefused, match=r"data\.source") as refused:
        confine_spec_paths(spec(name, "bert-base-uncased"), [data], [models])
    assert "root:x" not in str(refused.value)


def test_names_inside_the_roots_become_real_paths(roots: tuple[Path, Path, Path]) -> None:
    data, models, _ = roots
    confined = confine_spec_paths(spec("corpus.txt", "gpt2-small", "gpt2-small"), [data], [models])
    assert isinstance(confined, PaddingJobSpec)
    assert confined.data.source == os.path.realpath(data / "corpus.txt")
    assert confined.data.tokenizer == confined.model.path == os.path.realpath(models / "gpt2-small")


def test_without_roots_only_synthetic_hub_sources_and_hub_names_run(roots: tuple[Path, Path, Path]) -> None:
    document = spec("hf:wikitext:wikitext-2-raw-v1:train", "google-bert/bert-base-uncased", "openai/gpt2")
    assert confine_spec_paths(document, [], []) == document
    assert confine_spec_paths(spec(), [], []) == spec()
    with pytest.raises(PathRefused, match="PADBENCH_DATA_ROOTS"):
        confine_spec_paths(spec("corpus.txt", "bert-base-uncased"), [], [])
    with pytest.raises(PathRefused, match=r"model\.path"):
        confine_spec_paths(spec(model_path="../outside"), [], [roots[1]])


def test_a_job_child_runs_in_the_given_directory_and_writes_private_files(tmp_path: Path) -> None:
    from padbench.worker.runtime.isolation import run_in_child

    report = run_in_child("tests.unit.supervisor_targets:write_in_cwd", {}, workdir=str(tmp_path))
    assert report.outcome == "ok", report.error
    assert report.value == {"cwd": str(tmp_path), "file_mode": 0o600, "dir_mode": 0o700}
