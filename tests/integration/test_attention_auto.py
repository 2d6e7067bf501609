"""`attention: auto` end to end on the CPU: a first `padbench run` measures two kernels side by side, which feeds
the machine's table of kernel speeds; a second job that names no attention runs the faster of the two and says
why, in its result and in its table's header. Each job runs in its child process, as on a worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from padbench.cli import main
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.runtime.kernel_speeds import TIE_SHARE

SPEC = {
    "model": {"config": {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 512, "n_positions": 64}},
    "data": {"source": "synthetic", "max_length": 64, "num_samples": 16, "seed": 3},
    "batch_size": 4, "dtype": "fp32", "device": "cpu", "compile": False,
    "measurement": {"warmup_batches": 1, "min_seconds": 0.0, "min_batches": 2, "correctness_samples": 2,
                    "repeats": 1},
}


def run_job(tmp_path: Path, name: str, **fields: object) -> PaddingResult:
    spec, out = tmp_path / f"{name}.yaml", tmp_path / f"{name}.json"
    spec.write_text(yaml.safe_dump({**SPEC, **fields}))
    assert main(["run", str(spec), "--json", str(out)]) == 0
    result = JOB_RESULT_ADAPTER.validate_python(json.loads(out.read_text()))
    assert isinstance(result, PaddingResult)
    return result


@pytest.mark.slow
def test_a_job_naming_no_attention_runs_the_kernel_an_earlier_job_measured_faster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = run_job(tmp_path, "first", strategies=[{"name": "static", "attention": "sdpa"},
                                                  {"name": "static", "attention": "eager"}, "packed"])
    # Its packs named no kernel, and nothing compared kernels for packs: the static default, sdpa on a CPU in fp32
    # (no flash implementation runs there), and the result says so.
    assert first.attention_auto is not None and len(first.attention_auto) == 1
    default = first.attention_auto[0]
    assert (default.entry, default.chosen, default.measured) == ("packed", "sdpa", False)
    assert default.reason == ("no measurement comparing kernels for this job's kind, dtype, mode and layout on cpu: "
                              "the default, sdpa")
    assert first.strategies[2].kernel == "sdpa-block-mask"
    assert "attention auto chose sdpa for packs: no measurement" in capsys.readouterr().out
    measured = {row.attention: row.tokens_per_s for row in first.strategies[:2]}
    assert all(measured.values())
    faster, slower = sorted(measured, key=lambda family: -(measured[family] or 0.0))
    # Two figures within 2% are a tie, which goes to the default's preference rather than the faster one: on a
    # CPU these two kernels can land that close.
    tied = (measured[slower] or 0.0) >= (measured[faster] or 0.0) * (1 - TIE_SHARE)

    second = run_job(tmp_path, "second", strategies=["static"])
    assert second.spec.attention == "auto"  # the spec as written
    assert second.attention_auto is not None and len(second.attention_auto) == 1
    pick = second.attention_auto[0]
    assert (pick.entry, pick.measured, pick.device) == ("padded", True, "cpu")
    assert pick.chosen == faster or (tied and pick.chosen == slower)
    other = slower if pick.chosen == faster else faster
    # The reason names the chosen family's figure first (the faster one, unless a tie went the other way).
    assert pick.reason.startswith(f"fastest measured: {pick.chosen} ") and f" vs {other} " in pick.reason
    assert ("(a tie within 2%: the default's preference)" in pick.reason) == tied
    assert "(static · batch 4 · compile False) on cpu in padbench run on " in pick.reason
    assert pick.fastest is not None and pick.fastest.rate == pytest.approx(measured[pick.chosen])
    assert [row.attention for row in second.strategies] == [pick.chosen]
    assert f"attention auto chose {pick.chosen} for padded rows: fastest measured: {pick.chosen}" in \
        capsys.readouterr().out
