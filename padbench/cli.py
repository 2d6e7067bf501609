"""The single `padbench` command. Each role contributes its own subcommands through `register`.

A role's commands need that role's dependencies (`pip install 'padbench[server]'`, `'padbench[worker]'`);
the client's need only the base install. Where a role's extra is not installed its commands still show in
`--help`, and running one says which extra to install instead of failing with an import error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from padbench import __version__


@dataclass(frozen=True)
class Role:
    module: str  # exposes `register(subparsers)`; imported lazily so `padbench submit` never imports torch
    extra: str | None  # the pip extra that brings the role's dependencies; None: the base install
    commands: tuple[str, ...]  # what `register` adds, listed here for when the extra is missing


ROLES: tuple[Role, ...] = (
    Role("padbench.worker.cli", "worker", ("run", "tune", "check", "plan", "worker")),
    Role("padbench.server.cli", "server", ("server", "db", "token")),
    Role("padbench.client.cli", None, ("submit", "status", "wait", "results", "list", "cancel", "workers", "prune",
                                       "compare", "plot", "schema", "init", "demo", "history", "baseline")),
)


def missing_extra_handler(role: Role, missing: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        print(f"padbench {args.command}: needs the '{role.extra}' extra ({missing} is not installed): "
              f"pip install 'padbench[{role.extra}]'", file=sys.stderr)
        return 2

    return handler


def register_role(role: Role, subparsers: argparse._SubParsersAction) -> None:
    try:
        module = importlib.import_module(role.module)
    except ModuleNotFoundError as error:
        if role.extra is None or (error.name or "").startswith("padbench"):
            raise  # the base install or padbench itself is broken: that is not a missing extra
        for command in role.commands:
            parser = subparsers.add_parser(command, help=f"(needs: pip install 'padbench[{role.extra}]')",
                                           add_help=False)
            # Whatever options follow are the real command's: accept them, and say what to install.
            parser.set_defaults(handler=missing_extra_handler(role, error.name or "a dependency"),
                                ignores_arguments=True)
        return
    module.register(subparsers)


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
    return parser


def as_regression_gate(argv: Sequence[str]) -> list[str]:
    """`padbench check ID --against NAME`: the regression gate, which `padbench baseline check` runs (a bare
    `padbench check SPEC` checks a spec). Told apart by `--against`, which only the gate takes."""
    arguments = list(argv)
    gate = any(arg == "--against" or arg.startswith("--against=") for arg in arguments[1:])
    return ["baseline", *arguments] if arguments[:1] == ["check"] and gate else arguments


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(as_regression_gate(sys.argv[1:] if argv is None else argv))
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
