"""The shared HTTP session's retries: what is safe to send again, how long it waits, and when it gives up."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from padbench.http import ApiError, ApiSession

Handler = Callable[[httpx.Request], httpx.Response]


def session_for(handler: Handler, slept: list[float], budget_s: float = 30.0) -> ApiSession:
    return ApiSession("http://padbench.test", "t0ken", transport=httpx.MockTransport(handler),
                      retry_budget_s=budget_s, sleep=slept.append)


def answers(*responses: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving `responses` in turn (an exception is raised instead), and the requests it saw."""
    queue, seen = list(responses), []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler, seen


def saturated(retry_after: str = "2") -> httpx.Response:
    return httpx.Response(503, json={"detail": "the server is saturated"}, headers={"Retry-After": retry_after})


def test_a_503_is_retried_after_the_servers_retry_after_with_jitter_and_the_same_request() -> None:
    handler, seen = answers(saturated("2"), saturated("2"), httpx.Response(201, json={"id": 1}))
    slept: list[float] = []
    with session_for(handler, slept) as session:
        response = session.request("POST", "/jobs", json={"spec": {}}, headers={"Idempotency-Key": "k1"})
    assert response.status_code == 201
    assert len(seen) == 3 and {request.headers["Idempotency-Key"] for request in seen} == {"k1"}
    assert all(2.0 <= wait <= 3.0 for wait in slept) and len(slept) == 2


def test_a_429_is_retried_and_its_wait_is_on_the_error_when_the_budget_runs_out() -> None:
    handler, seen = answers(*[httpx.Response(429, json={"detail": "slow down"}, headers={"Retry-After": "60"})] * 2)
    slept: list[float] = []
    with session_for(handler, slept, budget_s=30.0) as session, pytest.raises(ApiError) as raised:
        session.request("GET", "/jobs")
    assert raised.value.status == 429 and raised.value.retry_after == 60.0 and raised.value.is_transient
    assert len(seen) == 1 and slept == []  # waiting 60 s would overrun the 30 s budget: said at once


def test_without_retry_after_the_back_off_grows_and_is_jittered() -> None:
    handler, _ = answers(*[httpx.Response(503, text="busy")] * 6, httpx.Response(200, json={}))
    slept: list[float] = []
    with session_for(handler, slept) as session:
        session.request("GET", "/jobs")
    assert len(slept) == 6
    assert all(0 <= wait <= 0.25 * 2**attempt for attempt, wait in enumerate(slept))


def test_a_refused_connection_is_retried_for_a_few_seconds_only() -> None:
    refused = httpx.ConnectError("connection refused")
    handler, seen = answers(refused, refused, httpx.Response(200, json={}))
    slept: list[float] = []
    with session_for(handler, slept) as session:
        assert session.request("POST", "/leases", json={}).status_code == 200  # never sent: safe even for a POST
    assert len(seen) == 3


def test_a_post_that_timed_out_is_not_resent_but_a_get_is() -> None:
    timeout = httpx.ReadTimeout("no answer")
    handler, seen = answers(timeout)
    with session_for(handler, []) as session, pytest.raises(ApiError, match="did not answer"):
        session.request("POST", "/jobs/3/cancel")
    assert len(seen) == 1
    handler, seen = answers(timeout, httpx.Response(200, json={}))
    with session_for(handler, []) as session:
        assert session.request("GET", "/jobs/3").status_code == 200
    assert len(seen) == 2


def test_client_errors_are_never_retried() -> None:
    handler, seen = answers(httpx.Response(422, json={"detail": "spec.model: unknown preset"}))
    with session_for(handler, []) as session, pytest.raises(ApiError, match="unknown preset"):
        session.request("POST", "/jobs", json={})
    assert len(seen) == 1


def test_a_zero_budget_sends_once() -> None:
    handler, seen = answers(saturated("1"))
    with session_for(handler, [], budget_s=0.0) as session, pytest.raises(ApiError):
        session.request("GET", "/jobs")
    assert len(seen) == 1
