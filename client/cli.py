"""Client subcommands: submit, status, wait, results, list, cancel."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:  # filled in by the engine and worker
    pass
