"""`padbench run SPEC.yaml [--set K=V] [--sweep K=A,B] [--json PATH]`: run job specs locally, without any server;
or `padbench run --model NAME [--input-len N --output-len M --num-prompts K | --batch-size B]`, a job from flags
(`padbench.worker.cli.quick`).

The job runs in a spawned child, exactly as a worker runs it, so an out-of-memory error, a sticky CUDA
error or a crash ends with a message instead of taking this process down; Ctrl-C kills the child.
Progress goes to stderr while it runs; the table goes to stdout. A sweep runs its points one after another.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, Literal, TextIO

from padbench.contract.kinds import JOB_RESULT_ADAPTER, JobResult
from padbench.contract.parallel import GpuRequest
from padbench.machine import visible_gpu_count
from padbench.report import render_json, render_table
from padbench.report.progress import RemainingTime, TerminalProgress, eta_text
from padbench.report.terminal import write_table
from padbench.spec_overrides import SpecPoint, add_override_options, expand
from padbench.specfile import SpecError, load_spec_document
from padbench.worker.cli.quick import add_quick_options, quick_document, quick_flags_given, with_flags
from padbench.worker.cli.sizing import gpu_sizing_warning
from padbench.worker.jobs import spec_json
from padbench.worker.runtime.isolation import ChildReport, LatestPartial
from padbench.worker.runtime.kernel_evidence import record_result
from padbench.worker.runtime.launcher import launch_job
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.runtime.state_files import replace_json

EXIT_FAILED, EXIT_BAD_SPEC = 1, 2
FLAGS_SOURCE = "the command line"  # what messages about a spec built from flags name as its source
JOB_ENTRY_POINT = "padbench.worker.jobs:run_job"


def add_run_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "run", help="run a job spec on this machine, without a server",
        description="Validate SPEC (or the spec the flags make: `padbench run --model tiny-llama --input-len 64 "
                    "--output-len 16 --num-prompts 32`), run it in a child process on this machine and print the "
                    "result table. Exit status: 0 with a result (failed strategies are rows of the table), "
                    "1 when the job produced no result, or stopped (--timeout, or its process died) after "
                    "finishing some rows, which are still printed and written, marked partial; 2 for an "
                    "invalid spec.")
    add_run_options(parser, spec_optional=True)
    add_quick_options(parser)
    parser.set_defaults(handler=run_spec_command, prog="padbench run")


def add_run_options(parser: argparse.ArgumentParser, spec_optional: bool = False) -> None:
    """What `padbench run` takes, and every command that runs a spec here as it does (`padbench tune`)."""
    parser.add_argument("spec", metavar="SPEC.yaml", nargs="?" if spec_optional else None,
                        help="a job spec (YAML or JSON)" + (" (or flags instead: see below)" if spec_optional else ""))
    parser.add_argument("--json", metavar="PATH", type=Path,
                        help="also write the full result as JSON to PATH (a sweep: PATH-1.json, PATH-2.json, …)")
    add_override_options(parser)
    parser.add_argument("--timeout", metavar="SECONDS", type=float, default=None,
                        help="stop the job after this many seconds, keeping the rows it finished (default: no "
                             "limit)")
    parser.add_argument("--traceback", action="store_true", help="print the job's traceback when it fails")
    parser.add_argument("--anyway", action="store_true",
                        help="run a spec sized for a GPU on this CPU even when it would take hours")


class ProgressPrinter:
    """A rich progress bar with elapsed time and ETA on a terminal; otherwise one line per new message, with
    the time left once the pace is known: `[ 21% ETA 1 min 05 s] static / sdpa: measuring`."""

    def __init__(self, stream: TextIO, remaining: RemainingTime | None = None) -> None:
        self.stream = stream
        self.terminal = TerminalProgress(stream, "run") if stream.isatty() else None
        self.remaining = remaining or RemainingTime()
        self.last_message: str | None = None

    def __call__(self, fraction: float, message: str) -> None:
        if self.terminal is not None:
            self.terminal.update(fraction, message)
            return
        seconds_left = self.remaining.update(fraction)
        if message != self.last_message:
            self.stream.write(f"[{fraction:4.0%}{eta_text(seconds_left)}] {message}\n")
            self.stream.flush()
        self.last_message = message

    def finish(self) -> None:
        if self.terminal is not None:
            self.terminal.stop()


def describe_failure(report: ChildReport, show_traceback: bool, prog: str = "padbench run") -> str:
    lines = [f"{prog}: the job ended with {report.outcome}: {report.error}"]
    if show_traceback and report.traceback:
        lines.append(report.traceback.rstrip())
    return "\n".join(lines)


def json_path(path: Path, index: int, points: int) -> Path:
    """Where point `index` (from 1) of `points` writes its --json file: PATH itself for a single job."""
    return path if points == 1 else path.with_name(f"{path.stem}-{index}{path.suffix}")


def run_spec_command(args: argparse.Namespace) -> int:
    try:
        points = spec_points(args)
    except SpecError as error:
        print(f"{args.prog}: {error}", file=sys.stderr)
        return EXIT_BAD_SPEC
    return run_points(points, args)


def spec_points(args: argparse.Namespace) -> list[SpecPoint]:
    """The jobs asked for: SPEC.yaml's, with any quick flags set in it, or the quick flags' own spec."""
    if args.spec is not None:
        document = load_spec_document(args.spec)
        return expand(args.spec, with_flags(document, args) if quick_flags_given(args) else document, args.sets,
                      args.sweeps)
    if not quick_flags_given(args):
        raise SpecError("give a spec file (`padbench init` writes one) or the job's flags, e.g. --model tiny-llama "
                        "--input-len 64 --output-len 16 --num-prompts 32")
    return expand(FLAGS_SOURCE, quick_document(args), args.sets, args.sweeps)


def run_points(points: list[SpecPoint], args: argparse.Namespace) -> int:
    if args.timeout is not None and args.timeout <= 0:
        print(f"{args.prog}: --timeout must be a positive number of seconds", file=sys.stderr)
        return EXIT_BAD_SPEC
    exit_code = 0
    for index, point in enumerate(points, start=1):
        if len(points) > 1:
            print(f"{args.prog}: job {index} of {len(points)}: {point.label}", file=sys.stderr)
        json_file = json_path(args.json, index, len(points)) if args.json is not None else None
        exit_code = max(exit_code, run_point(point, args, json_file))
    return exit_code


def run_point(point: SpecPoint, args: argparse.Namespace, json_file: Path | None) -> int:
    spec = point.spec
    warning = gpu_sizing_warning(spec, str(args.spec or FLAGS_SOURCE))
    if warning is not None:
        print(f"{args.prog}: {warning.text}", file=sys.stderr)
        if warning.refused and not args.anyway:
            return 2
    printer = ProgressPrinter(sys.stderr)
    kept = LatestPartial()

    def keep(document: Any) -> None:
        kept.keep(document)
        if json_file is not None:  # what is finished survives a run stopped outright (a lost machine, SIGKILL)
            write_running(json_file, document)

    try:
        ranks = GpuRequest.of(spec).ranks(visible_gpu_count())
        report = launch_job(JOB_ENTRY_POINT, spec_json(spec), ranks=ranks, timeout_s=args.timeout,
                            on_progress=printer, on_finished=keep)
    finally:
        printer.finish()
    if report.outcome == "ok":
        result = JOB_RESULT_ADAPTER.validate_python(report.value)
        # Measured here: `attention: auto` of later jobs on this machine (and its workers) reads the figures.
        record_result(report.value, "padbench run", WorkerSettings().kernel_speeds_path)
    else:
        print(describe_failure(report, args.traceback, args.prog), file=sys.stderr)
        if kept.latest is None:
            return EXIT_FAILED
        # Rows finished before the limit or the failure are whole measurements: keep them, marked partial,
        # rather than throw away minutes of GPU time with the rows that never ran.
        result = marked_stopped(kept.latest, "timed_out" if report.outcome == "timeout" else "failed")
        print(f"{args.prog}: the rows finished before it stopped follow, marked partial", file=sys.stderr)
    if json_file is not None:
        try:
            json_file.write_text(render_json(result) + "\n", encoding="utf-8")
        except OSError as error:
            print(f"{args.prog}: cannot write --json {json_file}: {error.strerror}", file=sys.stderr)
            print(render_table(result))
            return EXIT_FAILED
    if point.label:  # a sweep's tables, one after another on stdout, each under its job's name
        print(f"\n{spec.name}", flush=True)
    write_table(result, sys.stdout)
    return 0 if result.partial is None else EXIT_FAILED


def write_running(json_file: Path, document: dict[str, Any]) -> None:
    """The --json file while the job runs: the rows it finished so far, marked partial and still running, written
    whole. A file that cannot be written now is said at the end, when the result is written."""
    running = {**document, "partial": {**document["partial"], "reason": "running"}}
    with contextlib.suppress(OSError):
        replace_json(json_file, running, indent=2)


def marked_stopped(document: dict[str, Any], reason: Literal["timed_out", "failed"]) -> JobResult:
    """The last partial result a job handed over, as the result of a job stopped for `reason`."""
    result = JOB_RESULT_ADAPTER.validate_python(document)
    assert result.partial is not None  # a job hands over partial results only
    return result.model_copy(update={"partial": result.partial.model_copy(update={"reason": reason})})
