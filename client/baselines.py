"""`padbench baseline set NAME ID`, `padbench baseline list` and `padbench baseline check ID --against NAME`:
a CI gate that exits 1 when a row of the job is slower than the baseline's row of the same fingerprint beyond
noise (and beyond `--tolerance`), naming the row, the ratio and its 95% interval, and 0 with "within noise"
otherwise. `padbench check ID --against NAME` is the same gate, with the same options (`add_gate_options`)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from padbench.client.api import PadbenchClient
from padbench.client.exits import EXIT_FAILED
from padbench.terminal_text import literal

Handler = Callable[[PadbenchClient, argparse.Namespace], int]
Command = Callable[[argparse._SubParsersAction, str, Handler, str], argparse.ArgumentParser]


def tolerance(text: str) -> float:
    """An argparse type: a share from 0 up to (not including) 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (0.03 ignores slowdowns under 3%)") from None
    if not (0 <= value < 1 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text} must be at least 0 and below 1 (0.03 ignores slowdowns under 3%)")
    return value


def set_command(client: PadbenchClient, args: argparse.Namespace) -> int:
    baseline = client.set_baseline(args.name, args.job_id)
    print(f"baseline {baseline.name} → job {baseline.job_id}")
    return 0


def list_command(client: PadbenchClient, args: argparse.Namespace) -> int:
    for baseline in client.baselines():
        print(literal(f"{baseline.name}  job {baseline.job_id}  set by {baseline.set_by} "
                      f"{baseline.set_at.isoformat(timespec='seconds')}"))
    return 0


def check_command(client: PadbenchClient, args: argparse.Namespace) -> int:
    check = client.check_baseline(args.against, args.job_id, args.tolerance)
    if args.format == "json":
        print(check.model_dump_json(indent=2))
    else:
        for row in check.rows:
            print(literal(row.line))
        print(literal(check.summary if check.regressed else f"job {check.job_id}: {check.summary}"))
    return EXIT_FAILED if check.regressed else 0


def register_baselines(subparsers: argparse._SubParsersAction, command: Command) -> None:
    group = subparsers.add_parser("baseline", help="name a job's result, and check later jobs against it",
                                  description="Baselines for performance over time: `set` names a finished "
                                              "job's result, `list` shows them, `check` is the CI gate.")
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    setting = command(actions, "set", set_command, "name a finished job's result (created, or moved to this job)")
    setting.add_argument("name", metavar="NAME", help="letters, digits, '.', '_' and '-', e.g. main or h100-nightly")
    setting.add_argument("job_id", type=int, metavar="ID")
    command(actions, "list", list_command, "list the baselines: name, job, who set it and when")
    check = command(actions, "check", check_command,
                    "exit 1 when a row of the job is slower than the baseline's beyond noise, 0 otherwise")
    check.add_argument("job_id", type=int, metavar="ID")
    add_gate_options(check, against_required=True)


# What the gate's options default to, named here so `padbench check` can tell an option given from one left out.
GATE_DEFAULTS: dict[str, object] = {"tolerance": 0.0, "format": "table"}


def add_gate_options(parser: argparse.ArgumentParser, *, against_required: bool) -> None:
    """The gate's options, for `padbench baseline check` and `padbench check ID --against NAME` alike."""
    parser.add_argument("--against", required=against_required, metavar="NAME", help="the baseline to compare with")
    parser.add_argument("--tolerance", type=tolerance, default=GATE_DEFAULTS["tolerance"], metavar="SHARE",
                        help="ignore slowdowns smaller than this even when real, e.g. 0.03 for 3%% (default 0)")
    parser.add_argument("--format", choices=("table", "json"), default=GATE_DEFAULTS["format"],
                        help="a line per row for people (default), json for tools")
