"""The dashboard pages, their static files and the offline API docs, over real HTTP: pages carry no job
data and load nothing from elsewhere; viewers read every job and change nothing; the verdict the pages show
is the CLI's, served by the API; a job's device is listed whatever became of the job."""

from __future__ import annotations

import re
from typing import Any

import pytest

from padbench.contract.api import Capabilities, VerdictOut
from padbench.contract.kinds import JOB_RESULT_ADAPTER, parse_job_spec
from padbench.kinds.generate.verdict import verdict_lines as generate_verdict_lines
from padbench.kinds.padding.contract import PaddingResult, StrategyResult
from padbench.kinds.padding.verdict import verdict_lines
from padbench.report.noise import verdict_out
from padbench.worker.engine.measure.spread import repeat_spread
from tests.generate_result import generate_result
from tests.integration.conftest import LiveServer, result_document
from tests.integration.test_server_jobs import SPEC, claim, register, submit

EXTERNAL = re.compile(r"""(?:src|href)=["']https?://""")


@pytest.mark.parametrize("path", ["/", "/jobs/7", "/compare?ids=3,4", "/history?job=7", "/history/0123456789abcdef"])
def test_pages_are_shells_with_a_strict_content_security_policy(live_server: LiveServer, path: str) -> None:
    with live_server.client() as anonymous:
        page = anonymous.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert 'id="token-form"' in page.text and "/static/vendor/chartjs/chart.umd.min.js" in page.text
    assert all(f'<script src="/kinds/{kind}.js">' in page.text for kind in ("padding", "attention", "generate"))
    assert not EXTERNAL.search(page.text)


def test_compare_needs_two_to_eight_job_ids(live_server: LiveServer) -> None:
    with live_server.client() as anonymous:
        assert anonymous.get("/compare?ids=3").status_code == 422
        assert anonymous.get("/compare?ids=3,x").status_code == 422
        assert anonymous.get("/compare?ids=" + ",".join(map(str, range(1, 10)))).status_code == 422
        assert anonymous.get("/compare?ids=" + ",".join(map(str, range(1, 9)))).status_code == 200
        assert anonymous.get("/jobs/0").status_code == 422
        assert anonymous.get("/history?job=x").status_code == 422
        assert anonymous.get("/history/not-a-fingerprint").status_code == 422


@pytest.mark.parametrize("path", ["/static/common.js", "/static/charts.js", "/static/pages.js", "/static/history.js",
                                  "/kinds/padding.js", "/kinds/attention.js", "/kinds/generate.js",
                                  "/static/dashboard.css", "/static/vendor/chartjs/chart.umd.min.js",
                                  "/static/vendor/swagger-ui/swagger-ui-bundle.js",
                                  "/static/vendor/redoc/redoc.standalone.js"])
def test_static_files_are_served_by_the_server(live_server: LiveServer, path: str) -> None:
    with live_server.client() as anonymous:
        assert anonymous.get(path).status_code == 200


@pytest.mark.parametrize(("path", "asset"), [("/docs", "/static/vendor/swagger-ui/swagger-ui-bundle.js"),
                                             ("/redoc", "/static/vendor/redoc/redoc.standalone.js")])
def test_api_docs_use_the_servers_own_assets(live_server: LiveServer, path: str, asset: str) -> None:
    with live_server.client() as anonymous:
        page = anonymous.get(path)
    assert page.status_code == 200 and asset in page.text
    assert not EXTERNAL.search(page.text) and "fonts.googleapis" not in page.text


def test_a_viewer_reads_every_job_but_cannot_submit_or_cancel(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice, live_server.client("viewer") as viewer:
        job_id = submit(alice, SPEC)
        assert viewer.get("/v1/jobs").json()["total"] == 1
        assert viewer.get(f"/v1/jobs/{job_id}").json()["submitter"] == "alice"
        assert viewer.post("/v1/jobs", json={"spec": SPEC}).status_code == 403
        assert viewer.post(f"/v1/jobs/{job_id}/cancel").status_code == 403


def noisy_result(spec_document: dict[str, Any]) -> PaddingResult:
    """Every row noisy, static and dynamic within noise of each other although dynamic reads 1.59× static."""
    rows = [StrategyResult(strategy=name, attention="sdpa", kernel="sdpa", batch_size=8, status="ok",
                           tokens_per_s=rate, spread=repeat_spread(repeats, 0.05))
            for name, rate, repeats in (("static", 1000.0, [600.0, 1000.0, 1400.0]),
                                        ("dynamic", 1590.0, [900.0, 1600.0, 2270.0]))]
    result = JOB_RESULT_ADAPTER.validate_python(result_document(spec_document))
    assert isinstance(result, PaddingResult)
    return result.model_copy(update={"strategies": rows})


def test_the_verdict_served_to_the_dashboard_is_the_clis(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu, \
            any_live_server.client("viewer") as viewer, any_live_server.client("submitter2") as bob:
        job_id = submit(alice, SPEC)
        assert alice.get(f"/v1/jobs/{job_id}/verdict").status_code == 404  # no result yet
        lease = claim(gpu, register(gpu, "box-1"))
        assert lease is not None
        result = noisy_result(lease.job.spec)
        document = JOB_RESULT_ADAPTER.dump_python(result, mode="json")
        assert gpu.post(f"/v1/leases/{job_id}/complete",
                        json={"lease_token": lease.lease_token, "result": document}).status_code == 204
        served = VerdictOut.model_validate(viewer.get(f"/v1/jobs/{job_id}/verdict").json())
        assert served == verdict_out(result) and served.lines == verdict_lines(result)
        assert served.lines[0].startswith("verdict: within noise")
        assert bob.get(f"/v1/jobs/{job_id}/verdict").status_code == 404  # someone else's job


def test_a_generate_jobs_verdict_is_served_as_the_cli_prints_it(live_server: LiveServer) -> None:
    spec = {"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa"}
    with live_server.client("submitter") as alice, live_server.client("worker") as cpu:
        job_id = submit(alice, spec)
        lease = claim(cpu, register(cpu, "box-1"))
        assert lease is not None and lease.job.id == job_id
        result = generate_result().model_copy(update={"spec": parse_job_spec(lease.job.spec)})
        document = JOB_RESULT_ADAPTER.dump_python(result, mode="json")
        assert cpu.post(f"/v1/leases/{job_id}/complete",
                        json={"lease_token": lease.lease_token, "result": document}).status_code == 204
        served = VerdictOut.model_validate(alice.get(f"/v1/jobs/{job_id}/verdict").json())
    assert served == verdict_out(result) and served.lines == generate_verdict_lines(result)
    assert served.summary == "continuous / sdpa-kvcache: 2.4k output tokens/s" and served.winner == 2


def test_a_failed_job_names_the_device_it_ran_on(live_server: LiveServer) -> None:
    gpu_box = Capabilities(device="cuda", gpu_name="NVIDIA H100 80GB HBM3", kernels=["sdpa"]).model_dump(mode="json")
    with live_server.client("submitter") as alice, live_server.client("worker") as gpu:
        queued = submit(alice, SPEC | {"device": "auto"})
        assert alice.get("/v1/jobs").json()["items"][0]["device"] is None  # not claimed yet
        lease = claim(gpu, register(gpu, "box-1", gpu_box))
        assert lease is not None and lease.job.id == queued
        assert gpu.post(f"/v1/leases/{queued}/fail", json={"lease_token": lease.lease_token,
                                                           "error": "CUDA out of memory"}).status_code == 204
        listed = alice.get("/v1/jobs").json()["items"][0]
        assert (listed["status"], listed["worker"], listed["device"]) == ("failed", "box-1", "NVIDIA H100 80GB HBM3")
        assert alice.get(f"/v1/jobs/{queued}").json()["device"] == "NVIDIA H100 80GB HBM3"
