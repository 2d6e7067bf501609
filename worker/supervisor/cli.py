"""`padbench worker --server URL --token T [--gpu N]`."""

from __future__ import annotations

import argparse


def add_worker_command(subparsers: argparse._SubParsersAction) -> None:
    pass  # the supervisor adds `worker` here
