"""`padbench check SPEC`: what a job would build and run here, found without running it.

It validates the spec as a submission would, builds the model's config and its shape (on the meta device:
no memory, no weights), reads the tokenizer and checks that its ids fit the model's vocabulary, and resolves
each row's attention kernel on this machine's device, saying which will run and why the others are refused.
A Hub model or tokenizer is read from the Hugging Face cache alone, never the network: one not there is the
worker's to fetch, and said so.
Exit status 0 when everything would run, 1 when something would be refused, 2 when the spec itself is wrong.

The command line is the top `padbench` command's: `padbench check ID --against NAME` is the regression gate,
a client command, and only the top may reach both the client and the worker.
"""

from __future__ import annotations

import sys

from padbench.specfile import SpecError, load_spec


def check_spec(path: str) -> int:
    try:
        spec = load_spec(path)
    except SpecError as error:
        print(f"padbench check: {error}", file=sys.stderr)
        return 2
    from padbench.worker.cli.checking import report  # torch, only now that the command runs

    return report(spec, sys.stdout)
