"""`padbench tune SPEC.yaml [--set K=V] [--json PATH]`: find the fastest configuration that fits on this machine.

A tune spec (`kind: tune`, which a spec without a kind is here) names the model, the data, the GPUs and the mode;
the tune searches the settings that decide throughput within its time budget and prints every trial, the winner
and the settings to paste. It runs as `padbench run` runs a spec (the same options, the same exit status); over
HTTP it is a job of kind `tune` like any other.
"""

from __future__ import annotations

import argparse
import sys

from padbench.spec_overrides import expand
from padbench.specfile import SpecError, load_spec_document
from padbench.worker.cli.run import EXIT_BAD_SPEC, add_run_options, run_points

KIND = "tune"


def add_tune_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune", help="find the fastest configuration that fits, on this machine",
        description="Search layouts, attention kernels, batch sizes, activation checkpointing, compile and "
                    "precision for SPEC's model, data and GPUs, within its budget (tune.budget, default 15m): the "
                    "memory plan prunes what cannot fit, short trials narrow the rest by successive halving, the "
                    "finalists are measured with repeats. Prints every trial, the winner and the settings to "
                    "paste. Exit status as `padbench run`'s.")
    add_run_options(parser)
    parser.set_defaults(handler=tune_command, prog="padbench tune")


def tune_command(args: argparse.Namespace) -> int:
    try:
        document = load_spec_document(args.spec)
        kind = document.setdefault("kind", KIND)
        if kind != KIND:
            raise SpecError(f"kind: {kind!r}: padbench tune runs tune specs; run a {kind} spec with padbench run")
        points = expand(args.spec, document, args.sets, args.sweeps)
    except SpecError as error:
        print(f"{args.prog}: {error}", file=sys.stderr)
        return EXIT_BAD_SPEC
    return run_points(points, args)
