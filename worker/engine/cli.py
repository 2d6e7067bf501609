"""`padbench run SPEC.yaml`: run a job spec locally, without any server."""

from __future__ import annotations

import argparse


def add_run_command(subparsers: argparse._SubParsersAction) -> None:
    pass  # the engine adds `run` here
