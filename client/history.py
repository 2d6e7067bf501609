"""`padbench history FINGERPRINT|ID`: a row's figure over time, with its 95% interval and the versions that
changed between points (padbench, torch, transformers, CUDA, driver, kernel packages)."""

from __future__ import annotations

import argparse
import re
import sys

from rich import box
from rich.table import Table
from rich.text import Text

from padbench.client.api import PadbenchClient
from padbench.contract.history import History, HistoryPoint
from padbench.report.cells import MISSING
from padbench.report.terminal import console_for
from padbench.terminal_text import literal

FINGERPRINT = re.compile(r"[0-9a-f]{16}")


class NotAFingerprint(ValueError):
    """The argument is neither a job ID nor a fingerprint."""


def _figure(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.4g}" if value < 1000 else f"{value:,.0f}"


def _interval(low: float | None, high: float | None) -> str:
    return MISSING if low is None or high is None else f"{_figure(low)}–{_figure(high)}"


def _changes(changed: dict[str, list[str | None]]) -> str:
    return "; ".join(f"{name} {before or '(none)'} → {after or '(none)'}" for name, (before, after) in changed.items())


VERDICT_WORDS = {"slower": "slower beyond noise", "faster": "faster beyond noise", "within_noise": "within noise",
                 "unjudged": "unjudged", "missing": "not measured"}


def _baselines(point: HistoryPoint) -> str:
    """`baseline main` on a baseline's point; `main: 0.800× slower beyond noise` on a point judged against one."""
    named = [f"baseline {name}" for name in point.baselines]
    judged = [f"{check.baseline}: {'' if check.ratio is None else f'{check.ratio:.3f}× '}{VERDICT_WORDS[check.verdict]}"
              for check in point.against]
    return "; ".join(named + judged)


def history_table(found: History, plain: bool) -> Table:
    table = Table(show_edge=False, header_style="bold", pad_edge=False, box=None if plain else box.HEAVY_HEAD)
    # The baselines' column only where some point is or was judged against a baseline.
    marked = any(point.baselines or point.against for point in found.points)
    wrapped = ("changed since the point before", "baselines")
    for name, right in (("job", True), ("date", False), (found.metric_label, True), ("95% interval", True),
                        (wrapped[0], False), *([(wrapped[1], False)] if marked else [])):
        table.add_column(name, justify="right" if right else "left", no_wrap=name not in wrapped)
    for point in found.points:
        cells: list[str | Text] = [str(point.job_id), point.date, _figure(point.figure),
                                   _interval(point.ci95_low, point.ci95_high), Text(literal(_changes(point.changed)))]
        table.add_row(*cells, *([Text(literal(_baselines(point)))] if marked else []))
    return table


def print_history(found: History) -> None:
    console = console_for(sys.stdout)
    key = " / ".join(f"{name} {value}" for name, value in zip(found.key_names, found.key, strict=False))
    batch = "" if found.batch is None else f" · batch {found.batch}"
    console.print(Text(literal(f"{found.fingerprint}: {found.title} · {key}{batch}")))
    console.print(history_table(found, plain=not console.is_terminal))
    console.print()


def history_command(client: PadbenchClient, args: argparse.Namespace) -> int:
    # A fingerprint is 16 hex digits, a job ID at most 10 decimal ones: one never reads as the other.
    if args.what.isdigit() and not FINGERPRINT.fullmatch(args.what):
        found = client.job_history(int(args.what))
        if args.format == "json":
            print(found.model_dump_json(indent=2))
            return 0
        for one in found.histories:
            print_history(one)
        return 0
    if not FINGERPRINT.fullmatch(args.what):
        raise NotAFingerprint(f"{args.what!r} is neither a job ID nor a row's fingerprint (16 hex digits, as "
                         "`padbench history ID` prints them)")
    single = client.history(args.what)
    if args.format == "json":
        print(single.model_dump_json(indent=2))
    else:
        print_history(single)
    return 0


def add_history_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", metavar="FINGERPRINT|ID",
                        help="a row's fingerprint (16 hex digits), or a job ID for the history of each of its rows")
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="table for people (default), json for tools")
