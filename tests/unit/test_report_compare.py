"""Jobs side by side: rows matched by strategy × kernel (or kernel × length), ratios to the first job, in
every output format; a figure that was not measured has no ratio."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from padbench.contract.results import PaddingResult
from padbench.report.compare import (
    CompareError,
    compare,
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
    assert document["rows"][0] == {"strategy": "static", "kernel": "torch-flash", "values": [161_000.4, 322_000.8],
                                   "ratios_vs_first": [1.0, 2.0]}
    lines = list(csv.DictReader(io.StringIO(render_compare_csv(comparison))))
    assert len(lines) == 8 and lines[0]["job_id"] == "3" and lines[4]["job_id"] == "4"
    assert lines[4]["ratio_vs_first"] == "2.0" and lines[4]["gpu"] == "NVIDIA H100"


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
