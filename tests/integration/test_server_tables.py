"""The results table and the comparison the dashboard draws come from the server, computed by the code the CLI
prints with (one table model, one compare rule), over real HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx

from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.contract.table import Comparison, ResultTable
from padbench.kinds.padding.report import render_table, result_table
from padbench.report.compare import compare, comparison_model
from padbench.report.table import plain_text
from tests.generate_result import generate_result
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC, claim, register, submit
from tests.integration.test_server_web import noisy_result


def finish(user: httpx.Client, worker: httpx.Client, spec: dict[str, Any], result_of: Any) -> tuple[int, Any]:
    """A job submitted by `user`, claimed and completed by `worker` with the result `result_of(spec)`."""
    job_id = submit(user, spec)
    lease = claim(worker, register(worker, f"box-{job_id}"))
    assert lease is not None and lease.job.id == job_id
    result = result_of(lease.job.spec)
    document = JOB_RESULT_ADAPTER.dump_python(result, mode="json")
    assert worker.post(f"/v1/leases/{job_id}/complete",
                       json={"lease_token": lease.lease_token, "result": document}).status_code == 204
    return job_id, result


def test_the_table_served_is_the_one_the_cli_prints(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu, \
            any_live_server.client("viewer") as viewer:
        job_id, result = finish(alice, gpu, SPEC, noisy_result)
        served = ResultTable.model_validate(viewer.get(f"/v1/jobs/{job_id}/table").json())
        queued = submit(alice, SPEC)
        assert alice.get(f"/v1/jobs/{queued}/table").status_code == 404  # no result yet
    assert served == result_table(result) and plain_text(served) == render_table(result)
    assert [column.name for column in served.columns][:4] == ["strategy", "kernel", "batch", "tokens/s"]
    assert {column.name for column in served.columns if column.detail} == {"min–max", "CV", "MFU (GEMM)",
                                                                          "max logit error", "probe"}
    assert sorted(row.row for row in served.rows) == list(range(len(result.strategies)))


def test_a_comparison_is_served_by_the_clis_rule(live_server: LiveServer) -> None:
    generate = {"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa"}

    def generated(spec: dict[str, Any]) -> Any:
        return generate_result().model_copy(update={"spec": parse_job_spec(spec)})

    with live_server.client("submitter") as alice, live_server.client("worker") as cpu:
        first, result = finish(alice, cpu, SPEC, noisy_result)
        second, again = finish(alice, cpu, SPEC, noisy_result)
        other, _ = finish(alice, cpu, generate, generated)
        served = Comparison.model_validate(alice.get(f"/v1/compare?ids={first},{second}").json())
        mixed = alice.get(f"/v1/compare?ids={first},{other}")
        unknown = alice.get(f"/v1/compare?ids={first},999")
        alone = alice.get(f"/v1/compare?ids={first}")
        past = alice.get(f"/v1/compare?ids={first},9999999999")
    assert served == comparison_model(compare([(first, result), (second, again)]))
    assert served.metric_label == "tokens/s" and all(ratio in (1.0, None) for row in served.rows
                                                     for ratio in row.ratios)
    assert mixed.status_code == 422 and "compare jobs of one kind" in mixed.json()["detail"]
    assert unknown.status_code == 404 and alone.status_code == 422
    assert past.status_code == 422 and "past the largest job id" in past.json()["detail"]
