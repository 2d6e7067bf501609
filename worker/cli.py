"""Worker-side subcommands: `padbench run` (engine, no server) and `padbench worker` (supervisor)."""

from __future__ import annotations

import argparse

from padbench.worker.engine.cli import add_run_command
from padbench.worker.supervisor.cli import add_worker_command


def register(subparsers: argparse._SubParsersAction) -> None:
    add_run_command(subparsers)
    add_worker_command(subparsers)
