"""Every endpoint's authentication and authorisation: 401 without or with a bad token, 403 for the wrong
role, and through for the right one (admins may do everything; viewers read jobs, results and metrics and
change nothing). `/healthz` needs no token.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import PRINCIPALS, LiveServer

SUBMITTERS = {"submitter", "submitter2", "admin"}
WORKERS = {"worker", "worker2", "admin"}
READERS = SUBMITTERS | {"viewer"}
LEASE_BODY = {"lease_token": "not-a-real-lease-token"}
# (method, path, body, principals allowed through)
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None, set[str]]] = [
    ("POST", "/v1/jobs", {"spec": {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}}, SUBMITTERS),
    ("GET", "/v1/jobs", None, READERS),
    ("GET", "/v1/jobs/1", None, READERS),
    ("GET", "/v1/jobs/1/results", None, READERS),
    ("POST", "/v1/jobs/1/cancel", None, SUBMITTERS),
    ("POST", "/v1/workers", {"name": "w", "capabilities": {"device": "cpu"}}, WORKERS),
    ("GET", "/v1/workers", None, {"admin"}),
    ("POST", "/v1/leases", {"worker_id": 1}, WORKERS),
    ("POST", "/v1/leases/1/heartbeat", LEASE_BODY, WORKERS),
    ("POST", "/v1/leases/1/complete", {**LEASE_BODY, "result": {"kind": "attention"}}, WORKERS),
    ("POST", "/v1/leases/1/fail", {**LEASE_BODY, "error": "boom"}, WORKERS),
    ("POST", "/v1/leases/1/release", LEASE_BODY, WORKERS),
    ("GET", "/metrics", None, {"viewer", "admin"}),
]


@pytest.mark.parametrize(("method", "path", "body", "allowed"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS])
def test_endpoint_auth_matrix(live_server: LiveServer, method: str, path: str, body: Any, allowed: set[str]) -> None:
    with live_server.client() as anonymous:
        missing = anonymous.request(method, path, json=body)
        assert missing.status_code == 401 and "missing bearer token" in missing.json()["detail"]
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = anonymous.request(method, path, json=body, headers={"Authorization": "Bearer " + "x" * 40})
        assert wrong.status_code == 401 and wrong.json()["detail"] == "invalid bearer token"
        not_bearer = anonymous.request(method, path, json=body, headers={"Authorization": "Basic dXNlcjpwYXNz"})
        assert not_bearer.status_code == 401
    for who in PRINCIPALS:
        with live_server.client(who) as caller:
            status = caller.request(method, path, json=body).status_code
        if who in allowed:
            assert status not in (401, 403), f"{who} was refused {method} {path}"
        else:
            assert status == 403, f"{who} got {status} for {method} {path}"


def test_healthz_needs_no_token(live_server: LiveServer) -> None:
    with live_server.client() as anonymous:
        response = anonymous.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok"}


def test_openapi_documents_the_v1_routes(live_server: LiveServer) -> None:
    with live_server.client() as anonymous:
        paths = anonymous.get("/openapi.json").json()["paths"]
    assert {path for _, path, _, _ in ENDPOINTS if "/1" not in path} <= set(paths)
    assert "/v1/leases/{job_id}/heartbeat" in paths and "/v1/jobs/{job_id}/results" in paths
