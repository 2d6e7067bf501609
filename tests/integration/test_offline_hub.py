"""A Hub model or tokenizer with no network to the Hub, through the real commands, HF_HUB_OFFLINE unset: `run` ends
with one message saying so and what to do instead, no retries; `check` and `submit` never ask the Hub at all.

The Hub's address is a loopback port: a closed one (no network), or one that counts who connects (any contact).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import LiveServer, loopback_socket
from tests.unit.test_hub_access import closed_port

PADBENCH = [sys.executable, "-m", "padbench.cli"]
CPU = {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}
HUB_MODEL = {"kind": "padding", "name": "hub-model", "model": "hub:org/some-model", **CPU}
HUB_TOKENIZER = {
    "kind": "padding",
    "name": "hub-tokenizer",
    "model": "tiny",
    **CPU,
    "data": {"source": str(Path(__file__).parents[1] / "fixtures" / "corpus.txt"), "tokenizer": "org/some-tokenizer"},
}


def hub_at(endpoint: str, home: Path) -> dict[str, str]:
    """This process's environment with the Hub at `endpoint`, an empty Hugging Face cache and no offline switch."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    return env | {"HF_ENDPOINT": endpoint, "HF_HOME": str(home), "OMP_NUM_THREADS": "1"}


def spec_file(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


class Tripwire:
    """A listener on loopback that counts the connections made to it."""

    def __init__(self) -> None:
        self.socket = loopback_socket()
        self.socket.listen()
        self.connections = 0
        self.contacted = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            self.contacted.set()
            connection.close()


@pytest.fixture
def tripwire() -> Iterator[Tripwire]:
    wire = Tripwire()
    yield wire
    wire.socket.close()


def hub_data(tokenizer: Path) -> dict:
    """A Hub data set, tokenized by a local tokenizer."""
    return {**HUB_TOKENIZER, "name": "hub-data", "data": {"source": "hf:org/some-data", "tokenizer": str(tokenizer)}}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("asked", "named", "local"),
    [
        ("model", "model.hub 'org/some-model'", "PADBENCH_MODEL_ROOTS"),
        ("tokenizer", "data.tokenizer 'org/some-tokenizer'", "PADBENCH_MODEL_ROOTS"),
        ("data", "data.source 'hf:org/some-data'", "a local copy of its files"),
    ],
)
def test_run_without_network_says_so_once(
    tmp_path: Path, tokenizer_dir: Path, asked: str, named: str, local: str
) -> None:
    document = {"model": HUB_MODEL, "tokenizer": HUB_TOKENIZER, "data": hub_data(tokenizer_dir)}[asked]
    env = hub_at(f"http://127.0.0.1:{closed_port()}", tmp_path / "hf-home")
    done = subprocess.run(
        [*PADBENCH, "run", str(spec_file(tmp_path, document))], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 1
    assert f"{named}: no network to the Hugging Face Hub" in done.stderr
    for way in ("Hugging Face cache", "HF_HUB_OFFLINE=1", local):
        assert way in done.stderr
    assert done.stderr.count("no network") == 1 and "Retrying" not in done.stderr


def test_check_reads_the_cache_and_never_the_hub(tmp_path: Path, tripwire: Tripwire) -> None:
    for document in (HUB_MODEL, HUB_TOKENIZER):
        done = subprocess.run(
            [*PADBENCH, "check", str(spec_file(tmp_path, document))],
            env=hub_at(tripwire.url, tmp_path / "hf-home"),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert "not in this machine's Hugging Face cache; the worker that runs the job fetches it" in done.stdout
        assert done.returncode == 0, done.stdout + done.stderr
    assert tripwire.connections == 0


def test_submit_never_asks_the_hub(tmp_path: Path, tripwire: Tripwire, live_server: LiveServer) -> None:
    env = hub_at(tripwire.url, tmp_path / "hf-home") | {
        "PADBENCH_SERVER": live_server.base_url,
        "PADBENCH_TOKEN": live_server.tokens["submitter"],
    }
    on_the_worker = {**HUB_TOKENIZER, "data": {**HUB_TOKENIZER["data"], "source": "corpus.txt"}}  # its data root's
    for document in (HUB_MODEL, on_the_worker):
        done = subprocess.run(
            [*PADBENCH, "submit", str(spec_file(tmp_path, document))],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0 and "queued" in done.stdout, done.stderr
    assert tripwire.connections == 0


def test_the_tripwire_counts_a_connection(tripwire: Tripwire) -> None:
    """The tests above would pass for a listener that saw nothing: this one sees a connection."""
    with socket.create_connection(("127.0.0.1", tripwire.socket.getsockname()[1]), timeout=30):
        assert tripwire.contacted.wait(timeout=60)
    assert tripwire.connections == 1
