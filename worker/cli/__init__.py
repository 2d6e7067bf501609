"""Worker-side subcommands: `padbench run` (engine, no server), `padbench tune` (the fastest configuration that
fits, found here), `padbench plan` (its model's memory per GPU, on paper) and `padbench worker` (supervisor).
`padbench check SPEC` (what a spec would run here, `check.py`) is registered by the top `padbench` command,
which also makes `padbench check ID --against NAME` the client's regression gate."""

from __future__ import annotations

import argparse

from padbench.worker.cli.plan import add_plan_command
from padbench.worker.cli.run import add_run_command
from padbench.worker.cli.tune import add_tune_command
from padbench.worker.cli.work import add_worker_command


def register(subparsers: argparse._SubParsersAction) -> None:
    add_run_command(subparsers)
    add_tune_command(subparsers)
    add_plan_command(subparsers)
    add_worker_command(subparsers)
