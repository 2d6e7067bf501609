"""`padbench plan SPEC [--gpus N] [--nodes M] [--gpu-memory 80GiB]`: the memory a padding job's model state
takes on each GPU, worked out on paper before anything is built; across M nodes of N GPUs, FSDP2 shards over
all M × N ranks.

It counts the model's parameters on the meta device (no memory, no weights, any size) and prints the
parallelism and precision the job would run with, the bytes per rank by part (weights, gradients, optimizer
state, the layers FSDP2 gathers) and, when a GPU's memory is known (given, or read from the GPUs here),
whether they fit. Activations come on top: the OOM probe sizes the batch in what is left.
Exit status 0 when the state fits (or no memory is known to compare with), 1 when it does not, 2 when the
spec or an option is wrong.
"""

from __future__ import annotations

import argparse
import re
import sys

from padbench.contract.parallel import MAX_GPUS, MAX_NODES
from padbench.specfile import SpecError, load_spec

# `80GiB`, `141 GB`, `79.6gib`: a number and a unit, binary (KiB … TiB) or decimal (KB … TB).
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)\s*$", re.IGNORECASE)
UNIT_BYTES = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
              "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
MAX_GPU_MEMORY = 2**44  # 16 TiB: far beyond any GPU, yet a bound on a typo


def memory_size(text: str) -> int:
    """A size with its unit, in bytes; a bare number is refused (is `80` bytes or GiB?)."""
    match = SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: write a number and a unit, e.g. 80GiB or 141GB")
    count = int(float(match.group(1)) * UNIT_BYTES[match.group(2).lower()])
    if not 0 < count <= MAX_GPU_MEMORY:
        raise argparse.ArgumentTypeError(f"{text!r}: a GPU's memory is more than 0 bytes and at most 16 TiB")
    return count


def gpu_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of GPUs from 1 to {MAX_GPUS}")
    return int(text)


def node_count(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_NODES:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of nodes from 1 to {MAX_NODES}")
    return int(text)


def add_plan_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("plan", help="say how much memory a job's model takes on each GPU, before "
                                                "anything is built", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("spec", metavar="SPEC.yaml", help="a padding job spec (YAML or JSON)")
    parser.add_argument("--gpus", type=gpu_count, metavar="N",
                        help="plan for N GPUs (default: the spec's gpus; for gpus: all, the GPUs visible here)")
    parser.add_argument("--nodes", type=node_count, metavar="M",
                        help="plan for M nodes of N GPUs each, FSDP2 sharding over all M × N ranks (default: the "
                             "spec's nodes)")
    parser.add_argument("--gpu-memory", type=memory_size, metavar="SIZE",
                        help="the free memory of each GPU, e.g. 80GiB or 141GB (default: what the GPUs here "
                             "have free, when there are any)")
    parser.set_defaults(handler=plan_command)


def plan_command(args: argparse.Namespace) -> int:
    try:
        spec = load_spec(args.spec)
    except SpecError as error:
        print(f"padbench plan: {error}", file=sys.stderr)
        return 2
    from padbench.worker.cli.planning import PlanInputError, report  # torch, only now that the command runs

    try:
        return report(spec, args.gpus, args.gpu_memory, sys.stdout, args.nodes)
    except PlanInputError as error:
        print(f"padbench plan: {error}", file=sys.stderr)
        return 2
