"""How a kind of job is reported: its `KindReport`, part of the kind's record (`padbench.kinds.record`).

A report says how the kind's results print (a plain table, and on a terminal a richer one), which CSV rows
they export, what they are *of* (model, dtype, mode: the identity that leads every CSV row and titles every
plot), how two of them compare and what they add up to; everything that renders a result finds its kind's
report through the record rather than testing which kind it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from padbench.contract.results import Spread
from padbench.contract.table import ResultTable

R = TypeVar("R")  # the kind's result model
CompareKey = tuple[str, str]  # a row of a comparison: (strategy, kernel), (kernel, sequence length), …


@dataclass(frozen=True)
class RunFacts:
    """What a result is of, besides the device and the date its environment records."""

    model: str  # the model the job ran, or what stands for one (an attention sweep's shape)
    dtype: str
    mode: str  # inference or training, forward or forward+backward


@dataclass(frozen=True)
class CompareRule(Generic[R]):
    """How results of a kind are put side by side: one figure per row key and job."""

    figures: Callable[[R], dict[CompareKey, float | None]]  # None: not measured
    key_names: tuple[str, str]
    metric: str  # the figure's name in JSON and CSV
    metric_label: str  # the figure as the table's heading names it
    show: Callable[[float], str]  # a figure as the table prints it
    higher_is_faster: bool  # tokens/s; a time is faster when lower
    sort_key: Callable[[CompareKey], Any] | None = None  # None keeps the rows in the first job's order
    # Each row's batch size as its table prints it: a row's own setting, which two jobs' rows of one key may not
    # share (a `--sweep batch_size=4,8`), so the comparison shows it beside the figures. None: rows have none.
    batch_sizes: Callable[[R], dict[CompareKey, str]] | None = None
    # Each row's spread over its repeats, which tells a change between two jobs' rows from noise (`padbench
    # baseline check`); None: the kind's rows have none, so no change of theirs is judged beyond noise.
    spreads: Callable[[R], dict[CompareKey, Spread | None]] | None = None
    # Each row's GPU count where the rows of one job ran on different counts (a scaling axis), so a row's cost
    # counts the GPUs it held; None: every row held the job's GPUs.
    row_gpus: Callable[[R], dict[CompareKey, int]] | None = None


@dataclass(frozen=True)
class Verdict:
    """What a kind's rows add up to, in words, and which rows the words pick: the CLI prints `lines` under the
    table, the server serves all of it (rows named by index) so the dashboard marks the same rows."""

    lines: list[str]  # the verdict, then indented details
    summary: str | None  # the verdict in a few words, for a list of jobs
    rows: Sequence[Any]  # every row of the result, in stored order
    winner: Any | None  # the row to highlight: one of `rows`
    ranked: Sequence[Any]  # `rows` as the table lists them


@dataclass(frozen=True)
class KindReport(Generic[R]):
    noun: str  # one job of the kind, in messages: "a padding job"
    plural: str  # "padding jobs"
    render_table: Callable[[R], str]  # the plain text, for pipes, files and CI logs
    csv_rows: Callable[[R], list[dict[str, Any]]]
    run_facts: Callable[[R], RunFacts]
    compare: CompareRule[R]
    # The table as one model, which the terminal draws and the dashboard receives; None: the plain text everywhere
    # (the dashboard then draws the kind's own view of the result).
    table: Callable[[R], ResultTable] | None = None
    verdict: Callable[[R], Verdict] | None = None  # None: the kind ranks no rows (an attention sweep)
    # The verdict ranked by $ per million tokens, which returns None for a result without a price; None: the
    # kind's rows are no token rate to price (`padbench.report.ranking`).
    cost_verdict: Callable[[R], Verdict | None] | None = None
