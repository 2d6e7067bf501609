"""Several jobs side by side: the same rows (strategy × kernel for padding jobs, kernel × sequence length
for attention sweeps: each kind's `CompareRule`), each job's figure, and its ratio to the first job's.

Ratios always read "how many times faster than the first job": tokens/s divided by the first job's, or
for attention sweeps the first job's time divided by this one's. A figure that was not measured (an
invalid row, an OOM cell, a row the other job lacks) has no ratio.

A ratio is only as telling as the jobs are alike: `differences` names every setting that differs between
them (the device, the model, the data, dtype, mode, and the rows' own: batch size, layouts, kernels…), so a
comparison of two models, two data sets or two batch sizes never passes for a comparison of two GPUs; and where
the kind's rows have a batch size, the table shows it beside the figures.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from padbench.contract.results import JobResultBase
from padbench.contract.table import ComparedRow
from padbench.contract.table import Comparison as ComparisonModel
from padbench.kinds.record import kind_spec, kind_specs
from padbench.report.cells import MISSING
from padbench.report.identity import device_name, identity, title
from padbench.report.kind import CompareKey, CompareRule
from padbench.terminal_text import literal

FORMATS = ("table", "json", "csv")


class CompareError(ValueError):
    """Results that cannot be compared (a padding job beside an attention sweep, fewer than two)."""


@dataclass(frozen=True)
class CompareRow:
    key: CompareKey  # (strategy, kernel) or (kernel, sequence length)
    values: list[float | None]  # one per job, in the jobs' order
    ratios: list[float | None]  # value relative to the first job's, "× faster"
    batch_sizes: list[str | None]  # one per job, as its table prints it; None: the job has no such row


@dataclass(frozen=True)
class Comparison:
    kind: str  # the jobs' kind: "padding", "attention"
    rule: CompareRule[Any]
    jobs: list[tuple[int | None, JobResultBase]]
    rows: list[CompareRow]

    @property
    def key_names(self) -> tuple[str, str]:
        return self.rule.key_names

    @property
    def metric(self) -> str:  # "tokens_per_s", "median_ms"
        return self.rule.metric


def _ratio(value: float | None, baseline: float | None, higher_is_faster: bool) -> float | None:
    if value is None or baseline is None or value <= 0 or baseline <= 0:
        return None
    return value / baseline if higher_is_faster else baseline / value


def compare(jobs: list[tuple[int | None, JobResultBase]]) -> Comparison:
    if len(jobs) < 2:
        raise CompareError("compare needs at least two jobs")
    kinds = {result.kind for _, result in jobs}
    if len(kinds) > 1:
        first, second = [kind.report.noun for kind in kind_specs() if kind.name in kinds][:2]
        raise CompareError(f"cannot compare {first} with {second}: compare jobs of one kind")
    rule = kind_spec(jobs[0][1].kind).report.compare
    figures = [rule.figures(result) for _, result in jobs]
    batch_sizes = [rule.batch_sizes(result) if rule.batch_sizes else {} for _, result in jobs]
    keys = list(dict.fromkeys(key for job_figures in figures for key in job_figures))
    if rule.sort_key is not None:
        keys.sort(key=rule.sort_key)
    rows = []
    for key in keys:
        values = [job_figures.get(key) for job_figures in figures]
        rows.append(CompareRow(key, values, [_ratio(value, values[0], rule.higher_is_faster) for value in values],
                               [job_batches.get(key) for job_batches in batch_sizes]))
    return Comparison(kind=jobs[0][1].kind, rule=rule, jobs=jobs, rows=rows)


def batch_cell(row: CompareRow) -> str:
    """The row's batch size: one figure where every job ran it at the same, else each job's in order (`4 / 8`)."""
    shown = [MISSING if size is None else size for size in row.batch_sizes]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)


# Spec settings that never tell two measurements apart: a job's name is a label (a sweep's points are named by
# their settings, which are compared themselves), and the device is compared as the GPU the job ran on. Every
# other setting is, the rows' own included: two jobs that differ only in batch size make a row's ratio measure
# that batch size, and a row one job lacks is a layout or kernel the other never asked for.
NOT_COMPARED = frozenset({"name", "device"})


def _flat(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings as dotted names: {"data.max_length": 640, "model.preset": "gpt2-seed", ...}."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if not prefix and key in NOT_COMPARED:
            continue
        if isinstance(value, dict):
            flat |= _flat(value, f"{prefix}{key}.")
        else:
            flat[prefix + key] = value
    return flat


def _settings(result: JobResultBase) -> dict[str, Any]:
    settings = {"GPU": device_name(result), **_flat(result.spec.model_dump(mode="json", exclude_none=True))}
    if result.environment.dataset_digest is not None:
        settings["dataset digest"] = result.environment.dataset_digest[:12]
    return settings


def differences(comparison: Comparison) -> dict[str, list[Any]]:
    """Each setting whose value is not the same for every job, with its value per job (None: not set)."""
    settings = [_settings(result) for _, result in comparison.jobs]
    found = {}
    for name in dict.fromkeys(name for job in settings for name in job):
        values = [job.get(name) for job in settings]
        if len({json.dumps(value, sort_keys=True) for value in values}) > 1:
            found[name] = values
    return found


def difference_warning(comparison: Comparison) -> str | None:
    """One line naming what differs between the jobs, and their values in the jobs' order; None when alike."""
    found = differences(comparison)
    if not found:
        return None
    named = "; ".join(f"{name}: {' vs '.join(_setting(value) for value in values)}" for name, values in found.items())
    effect = "that difference" if len(found) == 1 else "all of these differences at once"
    return f"warning: the results differ in {named} — each ratio measures {effect}"


def _setting(value: Any) -> str:
    return "(not set)" if value is None else value if isinstance(value, str) else json.dumps(value)


def _figure(value: float | None, rule: CompareRule[Any]) -> str:
    return MISSING if value is None else rule.show(value)


def _job_label(index: int, job_id: int | None) -> str:
    return f"job {job_id}" if job_id is not None else f"result {index + 1}"


def comparison_table(comparison: Comparison, plain: bool = False) -> Table:
    """Drawn with box lines on a terminal; `plain`, columns set apart by spaces alone (pipes, files, logs)."""
    table = Table(show_edge=False, header_style="bold", pad_edge=False, title_justify="left",
                  box=None if plain else box.HEAVY_HEAD)
    for name in comparison.key_names:
        table.add_column(name.replace("_", " "), no_wrap=True)
    if comparison.rule.batch_sizes is not None:
        table.add_column("batch", justify="right", no_wrap=True)
    for index, (job_id, _) in enumerate(comparison.jobs):
        table.add_column(_job_label(index, job_id), justify="right", no_wrap=True)
        if index:
            table.add_column(f"× {_job_label(0, comparison.jobs[0][0])}", justify="right", no_wrap=True)
    for row in comparison.rows:
        # Keys carry names from specs and workers: text, never markup or a terminal's control sequence.
        cells: list[str | Text] = [Text(literal(part)) for part in row.key]
        if comparison.rule.batch_sizes is not None:
            cells.append(batch_cell(row))
        for index, (value, ratio) in enumerate(zip(row.values, row.ratios, strict=True)):
            cells.append(_figure(value, comparison.rule))
            if index:
                cells.append(MISSING if ratio is None else f"{ratio:.2f}×")
        table.add_row(*cells)
    return table


def render_compare_table(comparison: Comparison, console: Console) -> None:
    """The table on `console`, plain when the console is not a terminal."""
    for index, (job_id, result) in enumerate(comparison.jobs):
        console.print(Text(literal(f"{_job_label(index, job_id)}: {title(result)}")))
    baseline = _job_label(0, comparison.jobs[0][0])
    console.print(f"{comparison.rule.metric_label}; ratios: times faster than {baseline}", highlight=False)
    console.print()
    console.print(comparison_table(comparison, plain=not console.is_terminal))


def render_compare_json(comparison: Comparison) -> str:
    document = {
        "kind": comparison.kind,
        "metric": comparison.metric,
        "jobs": [identity(result, job_id) for job_id, result in comparison.jobs],
        "differences": differences(comparison),
        "rows": [{comparison.key_names[0]: row.key[0], comparison.key_names[1]: row.key[1],
                  **_batch_sizes(comparison, row), "values": row.values, "ratios_vs_first": row.ratios}
                 for row in comparison.rows],
    }
    return json.dumps(document, indent=2) + "\n"


def _batch_sizes(comparison: Comparison, row: CompareRow) -> dict[str, list[str | None]]:
    return {"batch_sizes": row.batch_sizes} if comparison.rule.batch_sizes is not None else {}


def comparison_model(comparison: Comparison) -> ComparisonModel:
    """The comparison as the API serves it to the dashboard: rows, values as the CLI prints them, ratios."""
    rule = comparison.rule
    return ComparisonModel(
        kind=comparison.kind, metric=rule.metric, metric_label=rule.metric_label, key_names=list(rule.key_names),
        higher_is_faster=rule.higher_is_faster, jobs=[job_id or 0 for job_id, _ in comparison.jobs],
        titles=[title(result, job_id) for job_id, result in comparison.jobs],
        differences={name: [_setting(value) for value in values]
                     for name, values in differences(comparison).items()},
        rows=[ComparedRow(key=list(row.key), values=row.values, shown=[_figure(value, rule) for value in row.values],
                          ratios=row.ratios, batch=batch_cell(row) if rule.batch_sizes is not None else None)
              for row in comparison.rows])


def render_compare_csv(comparison: Comparison) -> str:
    """Long format, one line per job and row, led by the job's identity columns."""
    buffer = io.StringIO()
    writer: csv.DictWriter[str] | None = None
    for position, (job_id, result) in enumerate(comparison.jobs):
        for row in comparison.rows:
            line = {**identity(result, job_id), comparison.key_names[0]: row.key[0],
                    comparison.key_names[1]: row.key[1],
                    **({"batch_size": row.batch_sizes[position]} if comparison.rule.batch_sizes is not None else {}),
                    comparison.metric: row.values[position], "ratio_vs_first": row.ratios[position]}
            if writer is None:
                writer = csv.DictWriter(buffer, fieldnames=list(line))
                writer.writeheader()
            writer.writerow(line)
    return buffer.getvalue()
