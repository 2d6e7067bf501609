"""The demo's building blocks: tokens the server accepts, loopback ports, a clean stop of subprocesses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from padbench.client.demo import (
    Tokens,
    add_demo_command,
    background,
    demo_environment,
    free_loopback_port,
    worker_gpu_options,
)
from padbench.server.core.security import parse_token_line
from padbench.tokens import token_digest


def test_generated_tokens_are_accepted_by_the_server_and_private(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    tokens = Tokens.generate()
    tokens.write(path)
    parsed = [parse_token_line(line, f"{path}:{n}") for n, line in enumerate(path.read_text().splitlines(), 1)]
    assert {(principal.role.value, digest) for principal, digest in filter(None, parsed)} == {
        ("submitter", token_digest(tokens.submitter)), ("worker", token_digest(tokens.worker)),
        ("admin", token_digest(tokens.admin)), ("viewer", token_digest(tokens.viewer))}
    assert tokens.submitter not in path.read_text()  # the file holds digests only
    assert path.stat().st_mode & 0o077 == 0
    assert len({tokens.submitter, tokens.worker, tokens.admin, tokens.viewer}) == 4


def test_a_free_port_is_on_loopback_and_usable() -> None:
    assert 1024 <= free_loopback_port() <= 65535


def test_a_background_process_is_stopped_when_the_block_exits(tmp_path: Path) -> None:
    log = tmp_path / "sleep.log"
    command = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    with background(command, log, env={}) as process:
        assert process.poll() is None
    assert process.returncode is not None and process.returncode < 0  # ended by SIGTERM, not by itself


def demo_arguments(*given: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_demo_command(parser.add_subparsers())
    return parser.parse_args(["demo", *given])


def test_the_demo_worker_owns_the_gpus_it_is_given() -> None:
    assert worker_gpu_options(demo_arguments("--gpus", "0,1")) == ["--gpus", "0,1"]  # for a `gpus: 2` spec
    assert worker_gpu_options(demo_arguments("--gpu", "1")) == ["--gpu", "1"]
    assert worker_gpu_options(demo_arguments()) == []  # the worker's own default: the first visible GPU
    with pytest.raises(SystemExit):  # one or the other
        demo_arguments("--gpu", "1", "--gpus", "0,1")


def test_the_demo_worker_reads_files_named_from_here_unless_its_roots_are_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PADBENCH_DATA_ROOTS", raising=False)
    monkeypatch.setenv("PADBENCH_MODEL_ROOTS", "/models")
    env = demo_environment(tmp_path / "scratch")
    assert env["PADBENCH_DATA_ROOTS"] == str(tmp_path)  # `.data/code.jsonl` in a spec means ./.data/code.jsonl
    assert env["PADBENCH_MODEL_ROOTS"] == "/models"  # the user's own setting stands
    assert env["PADBENCH_DATABASE_URL"] == f"sqlite:///{tmp_path / 'scratch' / 'padbench.db'}"
