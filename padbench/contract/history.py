"""HTTP API bodies of a row's history over time, of baselines and of the regression check against one.

A row's fingerprint (`padbench.report.fingerprint`) names what it measures; its history lists the figure of every
stored row of that fingerprint in date order, with the versions that changed from the point before. A baseline
is a name for one job's result; a check compares a job's rows with the baseline's rows of the same fingerprint,
and calls a row slower only beyond noise (Welch's t-test on the repeats, Fieller's interval of the ratio) and
beyond the caller's tolerance.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from padbench.contract.bounds import DbId, Label, Message, Name, NoNul

Fingerprint = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]
# A baseline's name: what a CI job passes on its command line (`main`, `h100-torch-2.13`).
BaselineName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]
Figure = Annotated[float, Field(ge=0, le=1e15)]
Ratio = Annotated[float, Field(ge=0, le=1e15)]
# A practical floor under which a slowdown is ignored even when it is real: 0.03 ignores those under 3%.
Tolerance = Annotated[float, Field(ge=0, lt=1)]
MAX_SEARCHED = 500  # a history searches the newest stored results the caller may read
MAX_POINTS = MAX_SEARCHED
MAX_ROWS = 4096
MAX_BASELINES = 1000  # baselines one job's result is reported against
RowVerdict = Literal["slower", "faster", "within_noise", "unjudged", "missing"]
VersionName = Annotated[str, Field(max_length=32), NoNul]
Versions = Annotated[dict[VersionName, Label | None], Field(max_length=16)]


class HistoryBody(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class RegressionFlag(HistoryBody):
    """What the server found when a new job's rows matched a baseline's, set on the job as its result is stored."""

    baseline: BaselineName
    baseline_job_id: DbId
    regressed: bool
    summary: Message


class PointCheck(HistoryBody):
    """One point's row against a baseline's row of the same fingerprint, judged as `padbench baseline check`
    judges it."""

    baseline: BaselineName
    baseline_job_id: DbId
    verdict: RowVerdict
    ratio: Ratio | None
    ratio_low: Ratio | None = None
    ratio_high: Ratio | None = None
    line: Message


class HistoryPoint(HistoryBody):
    job_id: DbId
    date: Annotated[str, Field(max_length=40)]  # when the run started, ISO 8601 UTC
    figure: Figure | None  # None: the row was not measured in this job (failed, invalid)
    # The 95% interval of the row's mean over its repeats; None with a single repeat.
    ci95_low: Figure | None = None
    ci95_high: Figure | None = None
    versions: Versions
    changed: Annotated[dict[VersionName, list[Label | None]], Field(max_length=16)] = {}  # vs the point before
    baselines: Annotated[list[BaselineName], Field(max_length=MAX_BASELINES)] = []  # the names set on this job
    # This row against each baseline's row of the same fingerprint (baselines among the history's points).
    against: Annotated[list[PointCheck], Field(max_length=MAX_BASELINES)] = []
    # What the automatic check of the job's whole result against its baselines found as it was stored.
    regressions: Annotated[list[RegressionFlag], Field(max_length=MAX_BASELINES)] = []


class History(HistoryBody):
    fingerprint: Fingerprint
    kind: Label
    key: Annotated[list[Label], Field(max_length=2)]  # the row's compare key: layout and kernel, …
    key_names: Annotated[list[Label], Field(max_length=2)]
    batch: Label | None
    metric: Label
    metric_label: Label
    higher_is_faster: bool
    title: Message  # model, GPU, dtype and mode
    points: Annotated[list[HistoryPoint], Field(max_length=MAX_POINTS)]


class Histories(HistoryBody):
    histories: Annotated[list[History], Field(max_length=MAX_ROWS)]


class BaselineSet(HistoryBody):
    job_id: DbId


class BaselineOut(HistoryBody):
    name: BaselineName
    job_id: DbId
    set_by: Name
    set_at: datetime


class RowCheck(HistoryBody):
    """One row of the baseline, judged in the checked job."""

    key: Annotated[list[Label], Field(max_length=2)]
    fingerprint: Fingerprint
    baseline: Figure | None
    figure: Figure | None
    ratio: Ratio | None  # how many times as fast as the baseline's row (below 1: slower)
    ratio_low: Ratio | None = None  # Fieller's 95% interval of the ratio; None without repeats on both sides
    ratio_high: Ratio | None = None  # None also where the interval has no upper bound
    # slower: beyond noise and tolerance; faster: beyond noise; within_noise; unjudged: a side has no repeats;
    # missing: the baseline measured it and this job did not
    verdict: RowVerdict
    line: Message


class RegressionCheck(HistoryBody):
    job_id: DbId
    baseline: BaselineName
    baseline_job_id: DbId
    tolerance: Tolerance
    regressed: bool  # some row slower beyond noise and tolerance, or missing
    rows: Annotated[list[RowCheck], Field(max_length=MAX_ROWS)]
    summary: Message

