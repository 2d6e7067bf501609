"""The single `padbench` command. Each role contributes its own subcommands through `register`.

A role's commands need that role's dependencies (`pip install 'padbench[server]'`, `'padbench[worker]'`);
the client's need only the base install. Where a role's extra is not installed its commands still show in
`--help`, and running one says which extra to install instead of failing with an import error.

`padbench check` is one command of two roles, so it is defined here, where both can be reached: a spec
checked on this machine (the worker's), or with `--against` a job gated against a baseline (the client's).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from padbench import __version__
from padbench.client.baselines import GATE_DEFAULTS, add_gate_options
from padbench.client.cli import connection_options, regression_gate


@dataclass(frozen=True)
class Role:
    module: str  # exposes `register(subparsers)`; imported lazily so `padbench submit` never imports torch
    extra: str | None  # the pip extra that brings the role's dependencies; None: the base install
    commands: tuple[str, ...]  # what `register` adds, listed here for when the extra is missing


WORKER = Role("padbench.worker.cli", "worker", ("run", "tune", "plan", "worker"))
ROLES: tuple[Role, ...] = (
    WORKER,
    Role("padbench.server.cli", "server", ("server", "token")),
    Role("padbench.server.db_cli", "server", ("db",)),
    Role("padbench.client.cli", None, ("submit", "status", "wait", "results", "list", "cancel", "workers", "prune",
                                       "compare", "plot", "schema", "init", "demo", "history", "baseline")),
)


def missing_extra_handler(role: Role, missing: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        print(f"padbench {args.command}: needs the '{role.extra}' extra ({missing} is not installed): "
              f"pip install 'padbench[{role.extra}]'", file=sys.stderr)
        return 2

    return handler


def missing_dependency(role: Role, error: ModuleNotFoundError) -> str:
    """The dependency that the role's extra brings and `error` found missing."""
    if role.extra is None or (error.name or "").startswith("padbench"):
        raise error  # the base install or padbench itself is broken: that is not a missing extra
    return error.name or "a dependency"


def register_role(role: Role, subparsers: argparse._SubParsersAction) -> None:
    try:
        module = importlib.import_module(role.module)
    except ModuleNotFoundError as error:
        missing = missing_dependency(role, error)
        for command in role.commands:
            parser = subparsers.add_parser(command, help=f"(needs: pip install 'padbench[{role.extra}]')",
                                           add_help=False)
            # Whatever options follow are the real command's: accept them, and say what to install.
            parser.set_defaults(handler=missing_extra_handler(role, missing), ignores_arguments=True)
        return
    module.register(subparsers)


CHECK_USES = (
    "padbench check SPEC.yaml says what a job spec would build and run on this machine, without running it: the "
    "model's config and shape, the tokenizer's fit to its vocabulary, and which attention kernel each row would "
    "use here and why the others are refused. Exit status 0 when everything would run, 1 when something would "
    "be refused, 2 when the spec itself is wrong. It needs the worker extra.",
    "padbench check ID --against NAME is the regression gate, as `padbench baseline check`: it exits 1 when a "
    "row of job ID is slower than baseline NAME's row of the same fingerprint beyond noise (and beyond "
    "--tolerance), naming the row, and 0 otherwise.",
)


def add_check_command(subparsers: argparse._SubParsersAction) -> None:
    """`padbench check`: a spec checked on this machine (worker), or a job gated against a baseline (client).
    Defined here, above both roles, because it is one command of each; the positional tells which."""
    parser = subparsers.add_parser(
        "check", parents=[connection_options()], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="say what a job spec would build and run here, without running it (`padbench check ID --against "
             "NAME`: the regression gate, as `padbench baseline check`)",
        usage="%(prog)s [-h] SPEC.yaml\n"
              "       %(prog)s [-h] [--server URL] [--token TOKEN] [--token-file PATH]\n"
              "                      --against NAME [--tolerance SHARE] [--format {table,json}] ID",
        description="\n\n".join(textwrap.fill(use, 78) for use in CHECK_USES))
    parser.add_argument("target", metavar="SPEC.yaml|ID",
                        help="a job spec (YAML or JSON) to check; with --against, the job to gate")
    add_gate_options(parser, against_required=False)
    parser.set_defaults(**dict.fromkeys(GATE_DEFAULTS), handler=lambda args: check_command(parser, args))


def check_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The spec checker without --against, the regression gate with it; a usage error where the positional
    does not fit (`parser.error`: exit status 2, as for any other bad command line)."""
    is_job_id = args.target.isdecimal()
    given = [f"--{name}" for name in GATE_DEFAULTS if getattr(args, name) is not None]
    if args.against is None:
        if is_job_id:
            parser.error(f"argument --against: {args.target} is a job ID, which is checked against a baseline: "
                         f"add --against NAME (a spec file of that name: ./{args.target})")
        if given:
            parser.error(f"argument {given[0]}: goes with --against (the regression gate), not with a spec")
        return check_a_spec(args)
    if not is_job_id:
        parser.error(f"argument --against: compares a job ID with a baseline, and {args.target!r} is not one "
                     "(a spec is checked without --against)")
    for name, default in GATE_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.job_id = int(args.target)
    return regression_gate(args)


def check_a_spec(args: argparse.Namespace) -> int:
    try:
        from padbench.worker.cli.check import check_spec  # torch: imported only where the worker extra is
    except ModuleNotFoundError as error:
        return missing_extra_handler(WORKER, missing_dependency(WORKER, error))(args)
    return check_spec(args.target)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="padbench",
        description="Which batching layout and attention kernel gives the most tokens per second for your "
                    "model, data and GPU — at what batch size, and by how much.",
        epilog="Start with `padbench init my.yaml`, then `padbench run my.yaml` (this machine) or "
               "`padbench submit my.yaml --wait` (the service). `padbench COMMAND --help` explains each command.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"padbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for role in ROLES:
        register_role(role, subparsers)
    add_check_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "ignores_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()  # so a reader that went away is seen here, not in the interpreter's exit
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return closed_pipe()


# What a shell reports for a command its pipe's reader left (`yes | head -1`): killed by SIGPIPE.
CLOSED_PIPE_EXIT = 128 + getattr(signal, "SIGPIPE", 13)


def closed_pipe() -> int:
    """The reader of stdout went away (`padbench list | head -2`): end quietly, as other Unix tools do.

    Python ignores SIGPIPE, so the write raised instead of the process ending. What is still buffered for stdout
    goes to /dev/null, or the interpreter's last flush would raise again and print the traceback anyway
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return CLOSED_PIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())
