"""Server subcommands: `padbench server`, `padbench db upgrade`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:  # filled in by the engine and worker
    pass
