"""`padbench run`: the example spec end to end through the real command, and its refusals."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.cli import run as run_command
from padbench.worker.cli.run import ProgressPrinter
from tests.acceptance.specs import QUICK

REPO_ROOT = Path(__file__).resolve().parents[2]
CPU_DEMO = REPO_ROOT / "examples" / "cpu-demo.yaml"


@pytest.fixture(autouse=True)
def one_thread_children(monkeypatch: pytest.MonkeyPatch) -> None:
    # The job runs in a spawned child, which reads this when it imports torch: tiny matmuls on a
    # shared two-core machine are several times faster without OpenMP spin-waits.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.mark.slow
def test_cpu_demo_runs_and_writes_the_full_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    assert main(["run", str(CPU_DEMO), "--json", str(out)]) == 0
    captured = capsys.readouterr()
    result = JOB_RESULT_ADAPTER.validate_python(json.loads(out.read_text()))
    assert isinstance(result, PaddingResult)
    assert [row.status for row in result.strategies] == ["ok"] * len(result.strategies)
    assert {row.strategy for row in result.strategies} == {"static", "dynamic", "binned", "packed"}
    # the table on stdout, progress on stderr
    assert "tokens/s" in captured.out and "binned[8]" in captured.out and "sdpa-block-mask" in captured.out
    assert "[100%] done" in captured.err and "measuring" in captured.err


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_a_bad_spec_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, "model: tiny\nstrategies:\n  - {name: static, n_bins: 4}\n")
    assert main(["run", str(spec)]) == 2
    error = capsys.readouterr().err
    assert "strategies.0" in error and "n_bins applies only to the binned strategy" in error


def test_flash_on_fp32_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, "dtype: fp32\nattention: flash\n")
    assert main(["run", str(spec)]) == 2
    assert "needs dtype bf16 or fp16" in capsys.readouterr().err


def test_a_missing_spec_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "absent.yaml")]) == 2
    assert "cannot read spec" in capsys.readouterr().err


@pytest.mark.slow
def test_a_job_that_cannot_start_exits_1_with_the_reason(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.txt"
    spec = write(tmp_path, f"model: tiny\ndtype: fp32\nattention: sdpa\ndevice: cpu\n"
                           f"data: {{source: {missing}, tokenizer: {tmp_path}}}\n")
    assert main(["run", str(spec)]) == 1
    error = capsys.readouterr().err
    assert "the job ended with error" in error and "data." in error and str(missing) in error


def test_run_progress_on_a_terminal_is_a_rich_bar_and_plain_lines_elsewhere() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        printer = ProgressPrinter(stream)
        printer(0.5, "packed: batch 3/6")
        printer(0.5, "packed: batch 3/6")
        printer.finish()
    assert "elapsed" in terminal.getvalue() and "ETA" in terminal.getvalue() and "50%" in terminal.getvalue()
    assert pipe.getvalue() == "[ 50%] packed: batch 3/6\n"


@pytest.mark.slow
def test_run_with_set_and_sweep_runs_each_point_and_writes_a_json_file_per_point(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "quick.yaml"
    spec.write_text(yaml.safe_dump(QUICK | {"strategies": ["static", "packed", "dynamic"]}))
    out = tmp_path / "out.json"
    code = main(["run", str(spec), "--set", "strategies=[static]", "--sweep", "batch_size=2,4", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    results = [JOB_RESULT_ADAPTER.validate_python(json.loads((tmp_path / f"out-{i}.json").read_text())) for i in (1, 2)]
    assert [(r.spec.name, r.spec.batch_size) for r in results] == [
        ("acceptance-quick[batch_size=2]", 2), ("acceptance-quick[batch_size=4]", 4)]
    assert all([row.strategy for row in r.strategies] == ["static"] for r in results)
    assert "job 1 of 2: batch_size=2" in captured.err and "job 2 of 2: batch_size=4" in captured.err
    assert captured.out.count("padding benchmark ·") == 2 and "acceptance-quick[batch_size=4]" in captured.out


def test_run_refuses_a_key_the_spec_has_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, "dtype: fp32\nattention: sdpa\ndevice: cpu\n")
    assert main(["run", str(spec), "--set", "batchsize=4"]) == 2
    assert capsys.readouterr().err == ("padbench run: --set batchsize: no key 'batchsize' in a padding spec "
                                       "(did you mean 'batch_size'?)\n")


def test_a_timed_out_job_keeps_the_rows_it_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A real child that hands over one finished row of two, then works on until the time limit kills it.
    monkeypatch.setattr(run_command, "JOB_ENTRY_POINT", "tests.unit.supervisor_targets:finish_a_row_then_wait")
    spec, out = write(tmp_path, "dtype: fp32\nattention: sdpa\ndevice: cpu\n"), tmp_path / "out.json"
    assert main(["run", str(spec), "--timeout", "2", "--json", str(out)]) == 1
    captured = capsys.readouterr()
    result = JOB_RESULT_ADAPTER.validate_python(json.loads(out.read_text()))
    assert isinstance(result, PaddingResult) and result.partial is not None
    assert (result.partial.reason, result.partial.rows_finished, result.partial.rows_planned) == ("timed_out", 1, 2)
    assert [row.tokens_per_s for row in result.strategies] == [1234.5]
    assert "ran past its 2 s limit" in captured.err and "marked partial" in captured.err
    assert "PARTIAL RESULT: the job ran out of its time limit after 1 of 2 strategy rows" in captured.out


def test_a_timed_out_job_with_no_finished_row_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_command, "JOB_ENTRY_POINT", "tests.unit.supervisor_targets:fail_after_progress")
    spec, out = write(tmp_path, "dtype: fp32\nattention: sdpa\ndevice: cpu\n"), tmp_path / "out.json"
    assert main(["run", str(spec), "--timeout", "1", "--json", str(out)]) == 1
    assert "the job ended with timeout: child ran past its 1 s limit" in capsys.readouterr().err
    assert not out.exists()


def test_a_job_whose_process_dies_keeps_the_rows_it_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_command, "JOB_ENTRY_POINT", "tests.unit.supervisor_targets:finish_a_row_then_die")
    spec, out = write(tmp_path, "dtype: fp32\nattention: sdpa\ndevice: cpu\n"), tmp_path / "out.json"
    assert main(["run", str(spec), "--json", str(out)]) == 1
    captured = capsys.readouterr()
    result = JOB_RESULT_ADAPTER.validate_python(json.loads(out.read_text()))
    assert result.partial is not None and (result.partial.reason, result.partial.rows_finished) == ("failed", 1)
    assert "the job ended with crash" in captured.err and "marked partial" in captured.out + captured.err
    assert "PARTIAL RESULT: the job failed after 1 of 2 strategy rows" in captured.out
