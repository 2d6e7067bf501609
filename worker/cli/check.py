"""`padbench check SPEC`: what a job would build and run here, found without running it.

It validates the spec as a submission would, builds the model's config and its shape (on the meta device:
no memory, no weights), reads the tokenizer and checks that its ids fit the model's vocabulary, and resolves
each row's attention kernel on this machine's device, saying which will run and why the others are refused.
A Hub model or tokenizer is read from the Hugging Face cache alone, never the network: one not there is the
worker's to fetch, and said so.
Exit status 0 when everything would run, 1 when something would be refused, 2 when the spec itself is wrong.
"""

from __future__ import annotations

import argparse
import sys

from padbench.specfile import SpecError, load_spec


def add_check_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("check", help="say what a job spec would build and run here, without running it "
                                   "(`padbench check ID --against NAME`: the regression gate, as `padbench baseline "
                                   "check`)", description=__doc__)
    parser.add_argument("spec", metavar="SPEC.yaml", help="a job spec (YAML or JSON)")
    parser.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
    except SpecError as error:
        print(f"padbench check: {error}", file=sys.stderr)
        return 2
    from padbench.worker.cli.checking import report  # torch, only now that the command runs

    return report(spec, sys.stdout)
