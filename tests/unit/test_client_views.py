"""`padbench plot`, `compare`, `results`, `schema` and `init` from the command line, on saved result files (no
server)."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest

from padbench.cli import main
from padbench.client.plot import MISSING_EXTRA, PlotError, save_plot
from padbench.client.views import read_result_file
from padbench.contract.kinds import parse_job_spec
from padbench.kinds.padding.plot import batch_curves
from padbench.report import render_json
from padbench.specfile import load_spec
from tests.unit.test_report_attention import result as attention_result
from tests.unit.test_report_padding import sample_result

H100_RESULT = Path(__file__).parents[2] / "docs" / "results" / "h100-2026-11-22" / "gpu-demo.json"


def saved(tmp_path: Path, name: str, result: object) -> str:
    path = tmp_path / name
    path.write_text(render_json(result), encoding="utf-8")  # type: ignore[arg-type]
    return str(path)


def test_plot_writes_a_png_of_a_real_gpu_result(tmp_path: Path) -> None:
    output = tmp_path / "h100.png"
    assert main(["plot", str(H100_RESULT), "-o", str(output)]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_svg_is_titled_with_model_gpu_dtype_and_date(tmp_path: Path) -> None:
    output = tmp_path / "two.svg"
    sources = [saved(tmp_path, "a.json", sample_result()), str(H100_RESULT)]
    assert main(["plot", *sources, "-o", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert "<svg" in text and "gpt2-seed" in text and "NVIDIA H200" in text and "2026-11-21" in text


def test_attention_sweeps_plot_time_and_memory(tmp_path: Path) -> None:
    output = tmp_path / "sweep.svg"
    assert main(["plot", saved(tmp_path, "sweep.json", attention_result()), "-o", str(output)]) == 0
    text = output.read_text(encoding="utf-8")
    assert "median time per call" in text and "peak memory above the inputs" in text


def test_batch_size_curves_only_where_a_layout_ran_at_several_sizes(tmp_path: Path) -> None:
    result = sample_result()
    assert batch_curves(result) == {}
    bigger = result.strategies[2].model_copy(update={"batch_size": 256, "tokens_per_s": 1_200_000.0})
    swept = result.model_copy(update={"strategies": [*result.strategies, bigger]})
    assert batch_curves(swept) == {"packed · torch-flash-varlen": [(128, 1_062_000.0), (256, 1_200_000.0)]}
    output = tmp_path / "swept.svg"
    save_plot([(1, swept)], output)
    assert "tokens/s against batch size" in output.read_text(encoding="utf-8")


def test_plot_refuses_other_extensions_and_mixed_kinds(tmp_path: Path) -> None:
    with pytest.raises(PlotError, match=r"\.png or \.svg"):
        save_plot([(1, sample_result())], tmp_path / "x.jpg")
    with pytest.raises(PlotError, match="one kind"):
        save_plot([(1, sample_result()), (2, attention_result())], tmp_path / "x.png")


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plot", str(H100_RESULT), "-o", str(tmp_path / "x.png")]) == 2
    assert MISSING_EXTRA in capsys.readouterr().err


def test_an_id_without_a_server_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADBENCH_SERVER", raising=False)
    assert main(["compare", "3", str(H100_RESULT), "--server", ""]) == 2
    assert "3 is a job ID" in capsys.readouterr().err


def test_compare_formats_from_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sources = [saved(tmp_path, "h200.json", sample_result()), str(H100_RESULT)]
    assert main(["compare", *sources, "--format", "csv"]) == 0
    lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {line["gpu"] for line in lines} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    assert main(["compare", *sources, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "tokens_per_s"
    assert main(["compare", *sources]) == 0
    printed = capsys.readouterr()
    assert "times faster than result 1" in printed.out
    assert not re.search("[\u2500-\u257f]", printed.out)  # a pipe gets plain text, no box drawing
    warning = printed.err.strip()
    assert warning.startswith("warning: the results differ in GPU: NVIDIA H200 vs NVIDIA H100 80GB HBM3")
    assert "data.num_samples: 2000 vs 20000" in warning and len(warning.splitlines()) == 1


def test_a_file_that_is_not_a_result_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"kind": "padding"}', encoding="utf-8")
    assert main(["compare", str(bogus), str(H100_RESULT)]) == 2
    assert "bogus.json is not a padbench result" in capsys.readouterr().err


def test_results_reads_a_file_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PADBENCH_SERVER", raising=False)  # a file needs no server
    monkeypatch.delenv("PADBENCH_TOKEN", raising=False)
    assert main(["results", str(H100_RESULT)]) == 0
    assert capsys.readouterr().out.startswith("padding benchmark · ")
    assert main(["results", str(H100_RESULT), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert rows and rows[0]["job_id"] == "" and rows[0]["gpu"] == "NVIDIA H100 80GB HBM3"
    copy = tmp_path / "copy.json"
    assert main(["results", str(H100_RESULT), "-o", str(copy)]) == 0
    assert read_result_file(copy) == read_result_file(H100_RESULT)
    assert f"wrote json results of {H100_RESULT} to {copy}" in capsys.readouterr().err


def test_results_names_a_file_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", str(tmp_path / "missing.json")]) == 2
    assert "padbench results: cannot read " in capsys.readouterr().err
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"kind": "padding"}', encoding="utf-8")
    assert main(["results", str(bogus)]) == 2
    assert "bogus.json is not a padbench result" in capsys.readouterr().err


def test_schema_is_the_job_spec_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"PaddingJobSpec", "AttentionJobSpec"} <= set(schema["$defs"])


def test_init_writes_a_spec_that_validates_and_keeps_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    assert main(["init", str(path)]) == 0
    assert "# " in path.read_text(encoding="utf-8") and load_spec(path).kind == "padding"
    assert main(["init", str(path)]) == 2
    assert main(["init", str(path), "--force"]) == 0
    assert main(["init", str(path), "--force", "--cpu"]) == 0
    spec = load_spec(path)
    assert (spec.device, spec.dtype, spec.attention) == ("cpu", "fp32", "sdpa")


def test_dtype_aliases_store_the_short_name() -> None:
    for alias, short in (("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"), ("bf16", "bf16")):
        assert parse_job_spec({"dtype": alias, "attention": "sdpa"}).dtype == short


def test_mistyped_keys_and_values_get_a_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text("kind: padding\ndtyp: bf16\nmode: trainng\ndata: {max_lenght: 128}\n", encoding="utf-8")
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "(did you mean 'dtype'?)" in err and "(did you mean 'training'?)" in err
    assert "(did you mean 'max_length'?)" in err
