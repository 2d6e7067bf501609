"""Every endpoint's authentication and authorisation: 401 without or with a bad token, 403 for the wrong
role, and through for the right one (admins may do everything; viewers read jobs, results, workers and
metrics and change nothing). `/healthz` needs no token. Failed authentications are limited and logged per
client address, on `/metrics` as on `/v1`, and that address is never one the client chose.
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from padbench.server.api.access_log import ACCESS_LOGGER
from tests.integration.conftest import PRINCIPALS, LiveServer, serve

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
    ("GET", "/v1/jobs/1/verdict", None, READERS),
    ("GET", "/v1/jobs/1/table", None, READERS),
    ("GET", "/v1/compare?ids=1,2", None, READERS),
    ("POST", "/v1/jobs/1/cancel", None, SUBMITTERS),
    ("POST", "/v1/jobs/prune", {"older_than_days": 30}, {"admin"}),
    ("POST", "/v1/workers", {"name": "w", "capabilities": {"device": "cpu"}}, WORKERS),
    ("GET", "/v1/workers", None, {"viewer", "admin"}),
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
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_openapi_documents_the_v1_routes(live_server: LiveServer) -> None:
    with live_server.client() as anonymous:
        paths = anonymous.get("/openapi.json").json()["paths"]
    assert {path.split("?")[0] for _, path, _, _ in ENDPOINTS if "/1" not in path} <= set(paths)
    assert "/v1/leases/{job_id}/heartbeat" in paths and "/v1/jobs/{job_id}/results" in paths


def send_headers_only(server: LiveServer, headers: str) -> bytes:
    """Send a request's headers announcing a large body, never the body; return what the server answers."""
    host, port = server.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {8 * 1024 * 1024}\r\n{headers}\r\n".encode())
        try:
            return sock.recv(4096)
        except TimeoutError:
            return b""  # the server is waiting for the body


def test_unauthenticated_requests_get_401_before_their_body_is_read(live_server: LiveServer) -> None:
    assert send_headers_only(live_server, "").startswith(b"HTTP/1.1 401")
    assert send_headers_only(live_server, "Authorization: Bearer not-a-token\r\n").startswith(b"HTTP/1.1 401")


def test_repeated_failures_of_one_token_get_429_and_are_logged_without_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guess = {"Authorization": "Bearer guessed-token-" + "x" * 20}
    other_guess = {"Authorization": "Bearer another-" + "y" * 30}
    with (serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, auth_failure_limit=3) as server,
          caplog.at_level(logging.WARNING, logger="padbench.server.auth"), server.client() as anonymous):
        codes = [anonymous.get("/v1/jobs", headers=guess).status_code for _ in range(5)]
        assert codes == [401, 401, 401, 429, 429]
        refused = anonymous.get("/v1/jobs", headers=guess)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert "too many failed authentications" in refused.json()["detail"]
        assert anonymous.get("/v1/jobs", headers=server.headers("submitter")).status_code == 200
        assert anonymous.get("/v1/jobs", headers=other_guess).status_code == 401
    failures = [record.getMessage() for record in caplog.records if record.name == "padbench.server.auth"]
    assert len(failures) == 4 and all("127.0.0.1" in line and "invalid bearer token" in line for line in failures)
    assert "guessed-token" not in caplog.text


def test_wrong_tokens_from_one_address_never_lock_out_a_valid_one(tmp_path: Path) -> None:
    """A worker with a stale token and a guesser on the same host as a healthy worker: the healthy one keeps
    registering and claiming, whatever the others have done."""
    with serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, auth_failure_address_limit=30) as server:
        stale = {"Authorization": "Bearer stale-" + secrets.token_urlsafe(32)}
        with server.client() as anonymous, server.client("worker") as worker:
            stale_codes = [anonymous.post("/v1/leases", json={"worker_id": 1}, headers=stale).status_code
                           for _ in range(25)]
            assert stale_codes == [401] * 20 + [429] * 5
            guesses = [anonymous.get("/v1/jobs", headers={"Authorization": f"Bearer {secrets.token_urlsafe(32)}"})
                       for _ in range(25)]
            assert [guess.status_code for guess in guesses] == [401] * 10 + [429] * 15
            assert int(guesses[-1].headers["Retry-After"]) >= 1
            registered = worker.post("/v1/workers", json={"name": "w", "capabilities": {"device": "cpu"}})
            assert registered.status_code in (200, 201)
            claim = worker.post("/v1/leases", json={"worker_id": registered.json()["id"]})
            assert claim.status_code == 204


def auth_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "padbench.server.auth"]


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def access_log() -> Iterator[Kept]:
    """uvicorn's access records while the block runs (its logger does not propagate, and serves at warning)."""
    logger, kept = logging.getLogger(ACCESS_LOGGER), Kept()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(kept)
    try:
        yield kept
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)


FORGED = [f"203.0.113.{number}" for number in range(1, 6)]


def forged_attempts(server: LiveServer) -> list[int]:
    """One wrong token from loopback five times, each claiming another address in X-Forwarded-For."""
    guess = {"Authorization": "Bearer guessed-token-" + "x" * 20}
    with server.client() as anonymous:
        return [anonymous.get("/v1/jobs", headers=guess | {"X-Forwarded-For": forged}).status_code
                for forged in FORGED]


def test_a_forged_x_forwarded_for_neither_escapes_the_limit_nor_reaches_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server runs with `padbench server`'s uvicorn options and no PADBENCH_TRUSTED_PROXIES: the header
    is ignored even from loopback, which uvicorn trusts by default."""
    with (serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, auth_failure_limit=3) as server,
          caplog.at_level(logging.WARNING, logger="padbench.server.auth"), access_log() as access):
        assert forged_attempts(server) == [401, 401, 401, 429, 429]
    failures = auth_failures(caplog)
    assert len(failures) == 3 and all("authentication failed from 127.0.0.1:" in line for line in failures)
    clients = [str(record.args[0]) for record in access.records if isinstance(record.args, tuple)]
    assert len(clients) == 5 and all(client.startswith("127.0.0.1:") for client in clients)
    assert not any(forged in caplog.text or forged in " ".join(clients) for forged in FORGED)


def test_a_named_proxys_x_forwarded_for_is_the_clients_address(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """The same requests from a trusted proxy (PADBENCH_TRUSTED_PROXIES=127.0.0.1, as docker's nginx is
    trusted): each forwarded address is a client of its own, counted and logged as such."""
    with (serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, auth_failure_limit=3,
                trusted_proxies="127.0.0.1") as server,
          caplog.at_level(logging.WARNING, logger="padbench.server.auth")):
        assert forged_attempts(server) == [401] * 5
    failures = auth_failures(caplog)
    assert [line.split()[3].rstrip(":") for line in failures] == FORGED


def test_wrong_tokens_on_metrics_are_limited_and_logged_like_every_route(any_live_server: LiveServer,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """/metrics shares the limiter with /v1: one wrong token tried 10 times on each is at the limit (20), so
    the next try on either is 429, and a valid viewer token from the same address still scrapes."""
    guess = {"Authorization": "Bearer guessed-token-" + "x" * 20}
    with caplog.at_level(logging.WARNING, logger="padbench.server.auth"), any_live_server.client() as anonymous:
        codes = [anonymous.get(path, headers=guess).status_code for path in ["/v1/jobs", "/metrics"] * 10]
        assert codes == [401] * 20
        refused = anonymous.get("/metrics", headers=guess)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert anonymous.get("/v1/jobs", headers=guess).status_code == 429
        assert anonymous.get("/metrics").status_code == 401  # a missing token is a credential of its own
        scraped = anonymous.get("/metrics", headers=any_live_server.headers("viewer"))
        assert scraped.status_code == 200 and "padbench_jobs" in scraped.text
    on_metrics = [line for line in auth_failures(caplog) if line.endswith("(GET /metrics)")]
    assert len(on_metrics) == 11 and all("from 127.0.0.1" in line for line in on_metrics)
    assert "guessed-token" not in caplog.text
