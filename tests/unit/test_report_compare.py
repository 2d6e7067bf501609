"""Jobs side by side: rows matched by strategy × kernel (or kernel × length), ratios to the first job, in
every output format; a figure that was not measured has no ratio."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from rich.console import Console

from padbench.contract.model_spec import ModelSpec
from padbench.kinds.padding.contract import PaddingResult
from padbench.report.compare import (
    CompareError,
    compare,
    difference_warning,
    differences,
    render_compare_csv,
    render_compare_json,
    render_compare_table,
)
from tests.unit.test_report_attention import result as attention_result
from tests.unit.test_report_padding import sample_result


def faster_copy(factor: float) -> PaddingResult:  # the same job on a GPU `factor` times as fast
    result = sample_result()
    rows = [row.model_copy(update={"tokens_per_s": row.tokens_per_s * factor if row.tokens_per_s else None})
            for row in result.strategies]
    environment = result.environment.model_copy(update={"gpu_name": "NVIDIA H100"})
    return result.model_copy(update={"strategies": rows, "environment": environment})


def test_padding_rows_match_by_strategy_and_kernel_with_ratios_to_the_first_job() -> None:
    comparison = compare([(3, sample_result()), (4, faster_copy(1.5))])
    rows = {row.key: row for row in comparison.rows}
    assert rows[("packed", "torch-flash-varlen")].values == [1_062_000.0, 1_593_000.0]
    assert rows[("packed", "torch-flash-varlen")].ratios == [1.0, 1.5]
    assert rows[("binned[16]", "torch-flash")].ratios == [None, None]  # invalid: no figure, no ratio


def test_attention_ratios_say_how_many_times_faster() -> None:
    slow = attention_result()
    fast = slow.model_copy(update={"cells": [cell.model_copy(update={"median_ms": cell.median_ms / 2})
                                             if cell.median_ms else cell for cell in slow.cells]})
    comparison = compare([(1, slow), (2, fast)])
    assert comparison.key_names == ("kernel", "seq_len")
    assert next(row for row in comparison.rows if row.key == ("naive", "4096")).ratios == [1.0, 2.0]


def test_table_json_and_csv() -> None:
    comparison = compare([(3, sample_result()), (4, faster_copy(2.0))])
    console = Console(file=io.StringIO(), width=200)
    render_compare_table(comparison, console)
    text = console.file.getvalue()
    assert "job 3: gpt2-seed · NVIDIA H200" in text and "job 4: gpt2-seed · NVIDIA H100" in text
    assert "2,124,000" in text and "2.00×" in text
    document = json.loads(render_compare_json(comparison))
    assert [job["gpu"] for job in document["jobs"]] == ["NVIDIA H200", "NVIDIA H100"]
    assert document["rows"][0] == {"strategy": "static", "kernel": "torch-flash", "batch_sizes": ["128", "128"],
                                   "values": [161_000.4, 322_000.8], "ratios_vs_first": [1.0, 2.0]}
    assert document["differences"] == {"GPU": ["NVIDIA H200", "NVIDIA H100"]}
    lines = list(csv.DictReader(io.StringIO(render_compare_csv(comparison))))
    assert len(lines) == 8 and lines[0]["job_id"] == "3" and lines[4]["job_id"] == "4"
    assert lines[4]["ratio_vs_first"] == "2.0" and lines[4]["gpu"] == "NVIDIA H100"
    assert lines[4]["batch_size"] == "128"


def test_jobs_of_different_kinds_or_a_single_job_are_refused() -> None:
    with pytest.raises(CompareError, match="one kind"):
        compare([(1, sample_result()), (2, attention_result())])
    with pytest.raises(CompareError, match="at least two"):
        compare([(1, sample_result())])


def test_a_layout_measured_at_several_batch_sizes_has_a_row_per_size() -> None:
    result = sample_result()
    bigger = result.strategies[2].model_copy(update={"batch_size": 256, "tokens_per_s": 1_200_000.0})
    swept = result.model_copy(update={"strategies": [*result.strategies, bigger]})
    keys = [row.key for row in compare([(1, swept), (2, swept)]).rows]
    assert ("packed @ 128", "torch-flash-varlen") in keys and ("packed @ 256", "torch-flash-varlen") in keys
    assert ("static", "torch-flash") in keys


BOX_DRAWING = re.compile("[\u2500-\u257f]")


@pytest.mark.parametrize("terminal", [True, False])
def test_the_table_draws_box_lines_only_on_a_terminal(terminal: bool) -> None:
    console = Console(file=io.StringIO(), width=200, force_terminal=terminal)
    render_compare_table(compare([(3, sample_result()), (4, faster_copy(2.0))]), console)
    text = console.file.getvalue()
    assert bool(BOX_DRAWING.search(text)) is terminal
    if not terminal:
        header = next(line for line in text.splitlines() if line.startswith("strategy"))
        assert header.split() == ["strategy", "kernel", "batch", "job", "3", "job", "4", "×", "job", "3"]


def test_alike_jobs_get_no_warning() -> None:
    comparison = compare([(3, sample_result()), (4, sample_result())])
    assert differences(comparison) == {} and difference_warning(comparison) is None


def test_the_warning_names_the_device_when_only_the_device_differs() -> None:
    warning = difference_warning(compare([(3, sample_result()), (4, faster_copy(2.0))]))
    assert warning == ("warning: the results differ in GPU: NVIDIA H200 vs NVIDIA H100 — each ratio measures that "
                       "difference")


def test_the_warning_names_every_setting_that_differs() -> None:
    other = sample_result()
    spec = other.spec.model_copy(update={"model": ModelSpec(preset="tiny"), "dtype": "fp16",
                                         "data": other.spec.data.model_copy(update={"max_length": 512})})
    environment = other.environment.model_copy(update={"dataset_digest": "fedcba9876543210"})
    other = other.model_copy(update={"spec": spec, "environment": environment})
    warning = difference_warning(compare([(3, sample_result()), (4, other)]))
    assert warning is not None
    for named in ("model.preset: gpt2-seed vs tiny", "data.max_length: 640 vs 512", "dtype: bf16 vs fp16",
                  "dataset digest: 0123456789ab vs fedcba987654", "all of these differences at once"):
        assert named in warning
    assert "GPU" not in warning and "name" not in warning


def test_attention_sweeps_of_other_shapes_are_named() -> None:
    narrow = attention_result()
    wide = narrow.model_copy(update={"spec": narrow.spec.model_copy(update={"heads": narrow.spec.heads * 2})})
    assert differences(compare([(1, narrow), (2, wide)])) == {"heads": [narrow.spec.heads, narrow.spec.heads * 2]}


def at_batch_size(result: PaddingResult, batch_size: int, factor: float) -> PaddingResult:
    """The same job run at another batch size (one point of `--sweep batch_size=...`), `factor` times as fast."""
    rows = [row.model_copy(update={"batch_size": batch_size,
                                   "tokens_per_s": row.tokens_per_s * factor if row.tokens_per_s else None})
            for row in result.strategies]
    spec = result.spec.model_copy(update={"batch_size": batch_size, "name": f"demo[batch_size={batch_size}]"})
    return result.model_copy(update={"strategies": rows, "spec": spec})


def test_jobs_that_differ_only_in_batch_size_show_it_and_are_warned() -> None:
    comparison = compare([(5, at_batch_size(sample_result(), 4, 1.0)), (6, at_batch_size(sample_result(), 8, 1.5))])
    assert differences(comparison) == {"batch_size": [4, 8]}
    assert difference_warning(comparison) == ("warning: the results differ in batch_size: 4 vs 8 — each ratio "
                                              "measures that difference")
    console = Console(file=io.StringIO(), width=200)
    render_compare_table(comparison, console)
    row = next(line for line in console.file.getvalue().splitlines() if line.startswith("packed"))
    assert row.split()[:3] == ["packed", "torch-flash-varlen", "4"] and "/" in row and row.split()[4] == "8"
    assert json.loads(render_compare_json(comparison))["rows"][0]["batch_sizes"] == ["4", "8"]
    assert [line["batch_size"] for line in csv.DictReader(io.StringIO(render_compare_csv(comparison)))][::4] == [
        "4", "8"]


def test_the_rows_own_settings_are_differences() -> None:
    other = sample_result()
    spec = other.spec.model_copy(update={"attention": "flex", "strategies": other.spec.strategies[:2]})
    found = differences(compare([(3, sample_result()), (4, other.model_copy(update={"spec": spec}))]))
    assert set(found) == {"attention", "strategies"}
