"""The dashboard pages, their static files and the offline API docs, over real HTTP: pages carry no job
data and load nothing from elsewhere; viewers read every job and change nothing."""

from __future__ import annotations

import re

import pytest

from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC, submit

EXTERNAL = re.compile(r"""(?:src|href)=["']https?://""")


@pytest.mark.parametrize("path", ["/", "/jobs/7", "/compare?ids=3,4"])
def test_pages_are_shells_with_a_strict_content_security_policy(live_server: LiveServer, path: str) -> None:
    with live_server.client() as anonymous:
        page = anonymous.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert 'id="token-form"' in page.text and "/static/vendor/chartjs/chart.umd.min.js" in page.text
    assert "/static/kinds/padding.js" in page.text and "/static/kinds/attention.js" in page.text
    assert not EXTERNAL.search(page.text)


def test_compare_needs_two_to_eight_job_ids(live_server: LiveServer) -> None:
    with live_server.client() as anonymous:
        assert anonymous.get("/compare?ids=3").status_code == 422
        assert anonymous.get("/compare?ids=3,x").status_code == 422
        assert anonymous.get("/compare?ids=" + ",".join(map(str, range(1, 10)))).status_code == 422
        assert anonymous.get("/compare?ids=" + ",".join(map(str, range(1, 9)))).status_code == 200
        assert anonymous.get("/jobs/0").status_code == 422


@pytest.mark.parametrize("path", ["/static/common.js", "/static/charts.js", "/static/pages.js",
                                  "/static/kinds/padding.js", "/static/kinds/attention.js",
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
