"""Client subcommands: submit, status, wait, results, list, cancel, compare, plot, schema, init (and `demo`);
for admins and viewers `workers`, for admins `prune`.

Every command takes `--server`/`PADBENCH_SERVER` and `--token`/`PADBENCH_TOKEN`. A failure prints one
line on stderr — the server's own reason when it gave one (e.g. a 422's field and message) — and exits
non-zero: 1 for a server or job failure, 2 for bad input on this side (a spec file that does not validate,
a missing server address).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

from padbench.client.api import PadbenchClient
from padbench.client.baselines import check_command as check_baseline
from padbench.client.baselines import register_baselines
from padbench.client.display import format_page, format_status, format_workers, page_table, workers_table
from padbench.client.exits import EXIT_FAILED, reported
from padbench.client.history import NotAFingerprint, add_history_options, history_command
from padbench.client.progress import ProgressBar
from padbench.client.views import SourceError, load_results
from padbench.contract.api import JobOut, JobStatus
from padbench.contract.bounds import MAX_RETENTION_DAYS
from padbench.http import TokenFileUnreadable, token_from_file
from padbench.report import render
from padbench.report.ranking import RANKINGS, RankBy
from padbench.report.terminal import write_table
from padbench.spec_overrides import add_override_options, load_points
from padbench.specfile import SpecError
from padbench.terminal_text import literal

FORMATS = ("table", "json", "csv", "record")


class UsageError(Exception):
    pass


USAGE_ERRORS = (UsageError, SpecError, TokenFileUnreadable, SourceError, NotAFingerprint)


def connection_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--server", default=os.environ.get("PADBENCH_SERVER"), metavar="URL",
                        help="the padbench service, e.g. http://gpu-box:8000 (default: $PADBENCH_SERVER)")
    parent.add_argument("--token", default=os.environ.get("PADBENCH_TOKEN"),
                        help="your access token (default: $PADBENCH_TOKEN); it shows in `ps`: prefer --token-file")
    parent.add_argument("--token-file", type=Path, default=os.environ.get("PADBENCH_TOKEN_FILE") or None,
                        metavar="PATH", help="a file whose first line is the token (default: $PADBENCH_TOKEN_FILE)")
    return parent


def _command(subparsers: argparse._SubParsersAction, name: str, handler: Callable[..., int],
             help_text: str) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=help_text, description=help_text, parents=[connection_options()])
    parser.set_defaults(handler=lambda args: _run(handler, args))
    return parser


def register(subparsers: argparse._SubParsersAction) -> None:
    from padbench.client.demo import add_demo_command
    from padbench.client.starter import register_starter
    from padbench.client.views import register_views

    submit = _command(subparsers, "submit", submit_job,
                      "check a job spec (YAML or JSON) and queue it on the service")
    submit.add_argument("spec", type=Path, metavar="SPEC", help="the job spec file (`padbench init` writes one)")
    submit.add_argument("--wait", action="store_true", help="stay until the job ends, then print its results table")
    submit.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                        help="with --wait: stop waiting after this long and exit 1; the job itself goes on "
                             "(`padbench wait ID` follows it again, `padbench cancel ID` stops it)")
    add_override_options(submit)
    status = _command(subparsers, "status", show_status, "show where a job is: status, progress, worker, errors")
    status.add_argument("job_id", type=int, metavar="ID")
    wait = _command(subparsers, "wait", wait_job, "follow a job until it ends, with a progress bar")
    wait.add_argument("job_id", type=int, metavar="ID")
    wait.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                      help="stop waiting after this long and exit 1; the job itself goes on")
    results_help = "print a finished job's results, or a saved result file's"
    results = subparsers.add_parser("results", help=results_help, description=results_help,
                                    parents=[connection_options()])
    # A file needs no server: like `plot` and `compare`, it reads what `run --json` or `results -o` saved.
    results.set_defaults(handler=lambda args: reported(args.command, lambda: show_results(args), USAGE_ERRORS))
    results.add_argument("source", metavar="ID|FILE",
                         help="a job ID on the server, or a result JSON file (from `padbench run --json` or "
                              "`results --format json`)")
    results.add_argument("--format", choices=FORMATS, default=None,
                         help="table for people; json (the whole result document, everything measured) or csv "
                              "for tools; record: a self-describing benchmark record to publish (what was measured, "
                              "on what hardware, the full spec, versions, date, each row, then the whole result) "
                              "(default: what --output's name ends in, .json or .csv; else table)")
    results.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                         help="write to FILE, not stdout: FILE.json gets the JSON document, FILE.csv the CSV "
                              "rows, any other name the plain text table (--format overrides the extension)")
    results.add_argument("--rank-by", choices=RANKINGS, default=None,
                         help="the verdict under the table: speed (default), or cost, in $ per million tokens at the "
                              "price per GPU-hour the job's worker was given (ranked by speed, saying so, where no "
                              "price is known)")
    listing = _command(subparsers, "list", list_jobs, "list your jobs, newest first")
    listing.add_argument("--status", choices=[status.value for status in JobStatus], default=None,
                         help="only jobs in this state")
    listing.add_argument("--limit", type=int, default=20, help="how many to show (default 20)")
    listing.add_argument("--offset", type=int, default=0, help="skip this many of the newest first")
    cancel = _command(subparsers, "cancel", cancel_job, "stop a queued or running job")
    cancel.add_argument("job_id", type=int, metavar="ID")
    _command(subparsers, "workers", list_workers,
             "list the registered workers: device, GPU, last contact, running job (admin or viewer token)")
    prune = _command(subparsers, "prune", prune_jobs,
                     "remove finished jobs, with their results, that ended long ago (admin token)")
    prune.add_argument("--older-than-days", type=int, required=True, metavar="N",
                       help=f"remove jobs that finished more than N days ago (1 to {MAX_RETENTION_DAYS}); "
                            "queued and running jobs always stay")
    add_history_options(_command(subparsers, "history", history_command,
                                 "a row's figure over time, with the versions that changed between points"))
    register_baselines(subparsers, _command)
    register_views(subparsers, connection_options())
    register_starter(subparsers)
    add_demo_command(subparsers)


def regression_gate(args: argparse.Namespace) -> int:
    """What `padbench baseline check` runs, for `padbench check ID --against NAME` (args.job_id set) to run too."""
    return _run(check_baseline, args)


def _run(handler: Callable[[PadbenchClient, argparse.Namespace], int], args: argparse.Namespace) -> int:
    return reported(args.command, lambda: _connected(handler, args), USAGE_ERRORS)


def _connected(handler: Callable[[PadbenchClient, argparse.Namespace], int], args: argparse.Namespace) -> int:
    token = args.token or (token_from_file(args.token_file) if args.token_file else None)
    if not args.server or not token:
        raise UsageError("--server and --token-file or --token (or PADBENCH_SERVER and PADBENCH_TOKEN_FILE or "
                         "PADBENCH_TOKEN) are required")
    with PadbenchClient(args.server, token) as client:
        return handler(client, args)


def submit_job(client: PadbenchClient, args: argparse.Namespace) -> int:
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout goes with --wait (it limits how long submit waits for the job)")
    # Validated here first, so a typo is named before any network call; the server validates again. The
    # full spec, defaults included, is what gets stored: a result must say exactly what it measured. Every
    # point of a sweep is checked before the first is submitted, so a bad one queues none.
    points = load_points(args.spec, args.sets, args.sweeps)
    job_ids = []
    for point in points:
        created = client.submit(point.spec.model_dump(mode="json"))
        label = f"  {point.label}" if point.label else ""
        print(f"job {created.id} {created.status.value}{label}", file=sys.stderr if args.wait else sys.stdout)
        job_ids.append(created.id)
    if not args.wait:
        return 0
    return max(_wait_and_print(client, job_id, timeout_s=args.timeout) for job_id in job_ids)


def show_status(client: PadbenchClient, args: argparse.Namespace) -> int:
    print(format_status(client.job(args.job_id)))
    return 0


def wait_job(client: PadbenchClient, args: argparse.Namespace) -> int:
    job = wait_with_progress(client, args.job_id, timeout_s=args.timeout)
    print(f"job {job.id} {job.status.value}")
    return _final_exit(job)


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def results_format(chosen: str | None, output: Path | None) -> str:
    """--format when given; otherwise what the output file's name ends in (.json, .csv), else the table."""
    if chosen is not None:
        return chosen
    extension = output.suffix.lower().removeprefix(".") if output is not None else ""
    return extension if extension in ("json", "csv") else "table"


def show_results(args: argparse.Namespace) -> int:
    [(job_id, result)] = load_results([args.source], args)
    fmt = results_format(args.format, args.output)
    if args.rank_by is not None and fmt != "table":
        raise UsageError(f"--rank-by orders the table's verdict; the {fmt} output carries every row's figure and "
                         "cost as they are")
    rank_by: RankBy = args.rank_by or "speed"
    if args.output is None and fmt == "table":
        write_table(result, sys.stdout, rank_by)
        return 0
    text = render(result, fmt, job_id=job_id, rank_by=rank_by)
    if args.output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {args.output}: {error.strerror}") from error
    what = f"job {job_id}" if job_id is not None else args.source
    print(f"wrote {fmt} results of {what} to {args.output}", file=sys.stderr)
    return 0


def list_jobs(client: PadbenchClient, args: argparse.Namespace) -> int:
    if args.limit < 1 or args.offset < 0:
        raise UsageError("--limit must be at least 1 and --offset not negative")
    status = JobStatus(args.status) if args.status else None
    page = client.jobs(status=status, limit=args.limit, offset=args.offset)
    _print_table(page_table(page), format_page(page))
    return 0


def _print_table(drawn: Table, plain: str) -> None:
    """The rich table on a terminal; piped or redirected, plain columns that tools can split."""
    if sys.stdout.isatty():
        Console().print(drawn)
    else:
        print(plain)


def cancel_job(client: PadbenchClient, args: argparse.Namespace) -> int:
    job = client.cancel(args.job_id)
    if job.status.is_final:
        print(f"job {job.id} {job.status.value}")
    else:
        print(f"job {job.id} {job.status.value}: cancel requested")
    return 0


def list_workers(client: PadbenchClient, args: argparse.Namespace) -> int:
    workers = client.workers()
    now = datetime.now(timezone.utc)
    _print_table(workers_table(workers, now), format_workers(workers, now))
    return 0


def prune_jobs(client: PadbenchClient, args: argparse.Namespace) -> int:
    if not 1 <= args.older_than_days <= MAX_RETENTION_DAYS:
        raise UsageError(f"--older-than-days must be from 1 to {MAX_RETENTION_DAYS}")
    pruned = client.prune(args.older_than_days)
    print(f"removed {pruned.removed} job(s) that finished more than {args.older_than_days} days ago")
    return 0


def wait_with_progress(client: PadbenchClient, job_id: int, timeout_s: float | None) -> JobOut:
    bar = ProgressBar()
    try:
        return client.wait(job_id, on_update=bar.update, timeout_s=timeout_s)
    finally:
        bar.finish()


def _final_exit(job: JobOut) -> int:
    if job.status is JobStatus.succeeded:
        return 0
    reason = f": {literal(job.error)}" if job.error else ""
    print(f"job {job.id} {job.status.value}{reason}", file=sys.stderr)
    return EXIT_FAILED


def _wait_and_print(client: PadbenchClient, job_id: int, timeout_s: float | None) -> int:
    job = wait_with_progress(client, job_id, timeout_s)
    if job.status is not JobStatus.succeeded:
        return _final_exit(job)
    write_table(client.results(job_id), sys.stdout)
    return 0
