"""A tune end to end on the CPU, queued over HTTP like any job and run by a real worker loop: it tries every
configuration of its space, prunes those the memory plan says cannot fit (with the reason), narrows the rest by
rounds of trials in child processes, measures the finalists with repeats, keeps every trial, names the winner
and ends with a padding spec to paste that runs as it is."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from padbench.cli import main
from padbench.contract.api import Capabilities
from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.contract.table import ResultTable
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.kinds.tune.contract import TuneResult
from padbench.worker.runtime.kernel_speeds import KernelSpeeds
from padbench.worker.runtime.settings import WorkerSettings
from padbench.worker.supervisor.api import WorkerApi
from padbench.worker.supervisor.loop import Supervisor, WorkerConfig
from tests.integration.conftest import LiveServer

SPACE = {"layouts": ["dynamic", "packed"], "kernels": ["sdpa", "eager"], "batch_sizes": [2, 4],
         "checkpointing": ["none", "full"], "compile": [False]}
# Between what batch 2 and batch 4 without recompute need by the plan (tiny, 32 tokens): the latter is pruned.
# The budget is a limit, not a target: the tune ends when every configuration is decided, in about a minute
# here, but a loaded machine starts each trial's child slowly and a tight budget would leave some not reached.
TUNE: dict[str, Any] = {"kind": "tune", "name": "tiny-tune", "model": "tiny", "device": "cpu", "dtype": "fp32",
                        "mode": "training", "data": {"num_samples": 32, "max_length": 32},
                        "tune": {"budget": "10m", "first_round_batches": 2, "repeats": 2, "memory_bytes": 37_700_000,
                                 "space": SPACE}}


@pytest.mark.slow
def test_a_tune_over_http_tries_prunes_narrows_and_names_a_winner_with_settings_to_paste(
        live_server: LiveServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with live_server.client("submitter") as http:
        job_id = http.post("/v1/jobs", json={"spec": TUNE}).raise_for_status().json()["id"]
    worker = Supervisor(WorkerApi(live_server.base_url, live_server.tokens["worker"]),
                        WorkerConfig(name="tune-test", once=True, job_timeout_s=900),
                        Capabilities(device="cpu", kernels=["sdpa", "eager"]))
    loop = threading.Thread(target=worker.run)
    loop.start()
    loop.join(timeout=900)
    assert not loop.is_alive()
    with live_server.client("submitter") as http:
        job = http.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "succeeded", job["error"]
        result = JOB_RESULT_ADAPTER.validate_python(http.get(f"/v1/jobs/{job_id}/results").json())
        table = ResultTable.model_validate(http.get(f"/v1/jobs/{job_id}/table").json())
    assert isinstance(result, TuneResult)
    fates = [trial.fate for trial in result.trials]
    assert len(result.trials) == 16 and fates.count("not reached") == 0  # every configuration kept, each decided
    pruned = [trial for trial in result.trials if trial.fate == "pruned"]
    assert pruned and all(trial.config.batch_size == 4 and trial.config.checkpointing == "none" for trial in pruned)
    assert all((trial.reason or "").startswith("the memory plan needs") for trial in pruned)
    assert sum(trial.rounds > 0 for trial in result.trials) >= 8  # measured in at least one round
    assert fates.count("finalist") == 3 and result.winner is not None
    winner = next(finalist for finalist in result.finalists if finalist.trial == result.winner)
    assert winner.status == "ok" and winner.spread is not None and winner.spread.repeats == 2
    pasted = parse_job_spec(json.loads(result.equivalents[0].settings or ""))
    assert isinstance(pasted, PaddingJobSpec) and pasted.batch_size == result.trials[result.winner].config.batch_size
    assert table.rows[0].mark == "winner" and table.verdict[0].startswith("verdict: fastest that fits:")
    # The worker keeps each kernel's best finalist in its table of kernel speeds, which `attention: auto` reads.
    kept = KernelSpeeds(WorkerSettings().kernel_speeds_path).figures()
    finalists = {result.trials[finalist.trial].config.kernel for finalist in result.finalists
                 if finalist.status == "ok"}
    assert {figure.family for figure in kept} == finalists
    assert {(figure.source, figure.place.mode) for figure in kept} == {(f"tune job {job_id}", "training")}

    monkeypatch.setenv("PADBENCH_SERVER", live_server.base_url)
    monkeypatch.setenv("PADBENCH_TOKEN", live_server.tokens["submitter"])
    assert main(["results", str(job_id)]) == 0
    shown = capsys.readouterr().out
    assert "settings to paste:" in shown and "TRL SFTConfig:" in shown and "★ " in shown


def test_padbench_tune_takes_a_spec_without_a_kind_and_refuses_another_kind(
        tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    padding = tmp_path / "padding.json"
    padding.write_text(json.dumps({"kind": "padding", "device": "cpu"}))
    assert main(["tune", str(padding)]) == 2
    assert "padbench tune runs tune specs; run a padding spec with padbench run" in capsys.readouterr().err
    bad = tmp_path / "tune.json"
    bad.write_text(json.dumps({"device": "cpu", "tune": {"budget": "soon"}}))
    assert main(["tune", str(bad)]) == 2
    assert "tune.budget" in capsys.readouterr().err
