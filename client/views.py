"""`padbench plot` and `padbench compare`: results as a picture, and several jobs side by side.

Each argument is a job ID on the server, or a saved result file (`padbench run --json FILE`,
`padbench results ID --format json`), so results kept in a repository can be drawn without a server.
The server and token are needed only when an ID is given.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from padbench.client.api import PadbenchClient
from padbench.client.exits import reported
from padbench.client.plot import PlotError, save_plot
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.http import TokenFileUnreadable, token_from_file
from padbench.report.compare import (
    FORMATS,
    CompareError,
    compare,
    difference_warning,
    render_compare_csv,
    render_compare_json,
    render_compare_table,
)
from padbench.report.terminal import console_for
from padbench.terminal_text import literal

Labelled = tuple[int | None, JobResultBase]


class SourceError(ValueError):
    pass


def read_result_file(path: Path) -> JobResultBase:
    try:
        return JOB_RESULT_ADAPTER.validate_json(path.read_bytes())
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error.strerror}") from error
    except ValidationError as error:
        raise SourceError(f"{path} is not a padbench result ({error.error_count()} problems, first: "
                          f"{error.errors()[0]['msg']})") from error


def load_results(sources: list[str], args: argparse.Namespace) -> list[Labelled]:
    """Each source in order: a job ID (read from the server) or a result file."""
    loaded: list[Labelled] = []
    client: PadbenchClient | None = None
    try:
        for source in sources:
            if not source.isdigit():
                loaded.append((None, read_result_file(Path(source))))
                continue
            if client is None:
                token = args.token or (token_from_file(args.token_file) if args.token_file else None)
                if not args.server or not token:
                    raise SourceError(f"{source} is a job ID: --server and --token-file or --token (or "
                                      "PADBENCH_SERVER and PADBENCH_TOKEN_FILE or PADBENCH_TOKEN) are needed to "
                                      "read it")
                client = PadbenchClient(args.server, token)
            loaded.append((int(source), client.results(int(source))))
    finally:
        if client is not None:
            client.close()
    return loaded


def plot_command(args: argparse.Namespace) -> int:
    jobs = load_results(args.sources, args)
    save_plot(jobs, args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def compare_command(args: argparse.Namespace) -> int:
    comparison = compare(load_results(args.sources, args))
    warning = difference_warning(comparison)
    if warning is not None:  # on stderr, so it is seen even when the table goes to a file or a tool
        print(literal(warning), file=sys.stderr)  # it quotes the jobs' settings: model names, GPU names…
    if args.format == "table":
        render_compare_table(comparison, console_for(sys.stdout))
    else:
        sys.stdout.write(render_compare_json(comparison) if args.format == "json" else render_compare_csv(comparison))
    return 0


def run_view(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    return reported(args.command, lambda: handler(args), (SourceError, PlotError, CompareError, TokenFileUnreadable))


def register_views(subparsers: argparse._SubParsersAction, connection: argparse.ArgumentParser) -> None:
    sources_help = "job IDs on the server, or result JSON files (from `padbench run --json` or `results --format json`)"
    plot = subparsers.add_parser(
        "plot", parents=[connection], help="draw jobs' results as a PNG or SVG chart",
        description="Draw tokens/s per layout and kernel (padding jobs; with tokens/s against batch size when "
                    "a job measured several), time and memory against sequence length (attention sweeps), or "
                    "output tokens/s per strategy beside the transformers references (generate jobs; with decode "
                    "tokens/s against context length for a context table), titled with model, GPU, dtype and "
                    "date. Needs pip install 'padbench[plot]'.")
    plot.add_argument("sources", nargs="+", metavar="ID|FILE", help=sources_help)
    plot.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.png|FILE.svg",
                      help="where to write the chart; the extension picks the format")
    plot.set_defaults(handler=lambda args: run_view(plot_command, args))
    comparison = subparsers.add_parser(
        "compare", parents=[connection], help="put jobs side by side, with ratios to the first",
        description="Show each job's tokens/s (output tokens/s for generate jobs; for attention sweeps, time "
                    "per call) for the same layout and kernel, and how many times faster it is than the first "
                    "job, e.g. one model on two GPUs. A warning on stderr names every setting the jobs differ in "
                    "(GPU, model, data, dtype, mode…); json lists them under `differences`. Piped or redirected, "
                    "the table is plain text.")
    comparison.add_argument("sources", nargs="+", metavar="ID|FILE", help=sources_help)
    comparison.add_argument("--format", choices=FORMATS, default="table",
                            help="table for people (default), json or csv for tools")
    comparison.set_defaults(handler=lambda args: run_view(compare_command, args))
