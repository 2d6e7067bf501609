"""The tokenization cache across processes: a second job (a fresh interpreter) maps the file, not the text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS_FILE

LOAD_IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path
from padbench.contract.spec import DataSpec
from padbench.worker.engine.data.sources import load_sequences
spec = DataSpec(source=sys.argv[1], tokenizer=sys.argv[2], num_samples=500)
loaded = load_sequences(spec, 30522, cache_dir=Path(sys.argv[3]), progress=lambda f, m: print(m))
print("digest", loaded.digest)
"""


def load_in_child(source: Path, tokenizer_dir: Path, cache: Path) -> list[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, str(source), str(tokenizer_dir),
                           str(cache)], capture_output=True, text=True, env=env, timeout=120, check=True)
    return done.stdout.splitlines()


@pytest.mark.slow
def test_a_second_process_reads_the_tokenized_file(tmp_path: Path, tokenizer_dir: Path) -> None:
    source, cache = CORPUS_FILE, tmp_path / "cache"
    lines = len(source.read_text(encoding="utf-8").splitlines())
    first = load_in_child(source, tokenizer_dir, cache)
    [tokenized_file] = (cache / "tokenized").glob("*.arrow")
    written = tokenized_file.stat().st_mtime_ns
    second = load_in_child(source, tokenizer_dir, cache)
    assert f"tokenizing {lines} lines" in first
    assert f"reading cached tokens for {lines} lines" in second
    assert tokenized_file.stat().st_mtime_ns == written
    assert list((cache / "tokenized").glob("*.arrow")) == [tokenized_file]
    assert first[-1] == second[-1]  # the same digest from both processes
