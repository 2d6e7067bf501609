"""A kind's results table as one model: its columns and cells are computed once, by the kind's report, and the
terminal (plain and rich), the CSV's column order and the dashboard (which receives it as JSON from
`GET /v1/jobs/{id}/table`) all render this model, so a column is added in one place.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from padbench.contract.bounds import Label
from padbench.contract.results import MAX_RESULT_ROWS

MAX_COLUMNS = 64
# How the verdict reads a row: the one it names, or one not to rank by (invalid, noisy, contended).
RowMark = Literal["winner", "doubtful"] | None
MAX_LINES = 4096
# A cell, a note or a line of the verdict: text written by padbench from the stored result (an error message
# included), never a document.
Line = Annotated[str, Field(max_length=100_000)]


class TableModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableColumn(TableModel):
    name: Label
    right: bool = False  # numbers line up on the right
    # A figure to read a row by on demand: the terminal shows it as a column, the dashboard in the row's details.
    detail: bool = False


class TableRow(TableModel):
    cells: Annotated[list[Line], Field(max_length=MAX_COLUMNS)]  # in the columns' order
    row: Annotated[int, Field(ge=0, lt=MAX_RESULT_ROWS)] | None = None  # the result's row it shows, by index
    mark: RowMark = None


class ResultTable(TableModel):
    header: Annotated[list[Line], Field(max_length=64)] = []  # what was run, on what, with which versions
    columns: Annotated[list[TableColumn], Field(max_length=MAX_COLUMNS)] = []  # none: the kind draws no table
    rows: Annotated[list[TableRow], Field(max_length=MAX_RESULT_ROWS)] = []  # in the order to read them
    notes: Annotated[list[Line], Field(max_length=MAX_LINES)] = []  # numbered notes the cells refer to, `[1]`
    verdict: Annotated[list[Line], Field(max_length=MAX_LINES)] = []  # the verdict, then indented details
    after: Annotated[list[Line], Field(max_length=MAX_LINES)] = []  # curves and details below the verdict


MAX_COMPARED = 8  # jobs in one comparison: beyond that neither a table nor a chart stays readable


class ComparedRow(TableModel):
    key: Annotated[list[Label], Field(min_length=2, max_length=2)]  # (strategy, kernel), (kernel, length), …
    values: Annotated[list[float | None], Field(max_length=MAX_COMPARED)]  # one per job; None: not measured
    shown: Annotated[list[Label], Field(max_length=MAX_COMPARED)]  # the values as `padbench compare` prints them
    ratios: Annotated[list[float | None], Field(max_length=MAX_COMPARED)]  # × faster than the first job
    # The row's batch size as `padbench compare` prints it (`8`, or each job's: `4 / 8`); None: rows have none.
    batch: Label | None = None


class Comparison(TableModel):
    """Jobs of one kind side by side, as `padbench compare` lays them out, for the dashboard to draw."""

    kind: Label
    metric: Label  # the figure's name in JSON and CSV: `tokens_per_s`, `median_ms`
    metric_label: Label  # the figure as a heading names it: `tokens/s`
    key_names: Annotated[list[Label], Field(min_length=2, max_length=2)]
    higher_is_faster: bool
    jobs: Annotated[list[int], Field(min_length=2, max_length=MAX_COMPARED)]
    titles: Annotated[list[Line], Field(max_length=MAX_COMPARED)]  # each job as titles name it
    # Settings that differ between the jobs, each job's value as text: a ratio is only as telling as the jobs
    # are alike.
    differences: Annotated[dict[Label, Annotated[list[Line], Field(max_length=MAX_COMPARED)]],
                           Field(max_length=1024)] = {}
    rows: Annotated[list[ComparedRow], Field(max_length=MAX_RESULT_ROWS)] = []
