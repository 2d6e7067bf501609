"""`padbench run` (local, no server) and `padbench worker` subcommands."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:  # filled in by the engine and worker
    pass
