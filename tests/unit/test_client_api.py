"""The client's httpx layer: request bodies, one-line errors, waiting — against an in-process transport."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest

from padbench.client.api import PadbenchClient
from padbench.http import ApiError, describe_detail, error_from_response

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc).isoformat()


def job_summary_body(job_id: int = 7, status: str = "queued", **fields: Any) -> dict[str, Any]:
    """A job as the list shows it: no spec."""
    return {"id": job_id, "kind": "padding", "status": status, "attempts": 0, "max_attempts": 3,
            "submitter": "alice", "created_at": NOW, **fields}


def job_body(job_id: int = 7, status: str = "queued", **fields: Any) -> dict[str, Any]:
    return {**job_summary_body(job_id, status), "spec": {"kind": "padding"}, **fields}


def client_for(handler: Any) -> PadbenchClient:
    return PadbenchClient("http://padbench.test", "t0ken", transport=httpx.MockTransport(handler))


def test_submit_sends_the_spec_under_spec_with_the_bearer_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"id": 3, "status": "queued"})

    with client_for(handler) as client:
        created = client.submit({"kind": "padding"})
    assert created.id == 3
    assert seen[0].url.path == "/v1/jobs"
    assert seen[0].headers["authorization"] == "Bearer t0ken"
    assert json.loads(seen[0].content) == {"spec": {"kind": "padding"}}
    assert uuid.UUID(seen[0].headers["idempotency-key"]).version == 4


class RetryingClient(PadbenchClient):
    """Sends every request twice, as a session does that retries after an answer was lost."""

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        super().request(method, path, **kwargs)
        return super().request(method, path, **kwargs)


def test_each_submit_has_its_own_idempotency_key_and_a_retry_repeats_it() -> None:
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["idempotency-key"])
        return httpx.Response(201, json={"id": 3, "status": "queued"})

    with RetryingClient("http://padbench.test", "t0ken", transport=httpx.MockTransport(handler)) as client:
        client.submit({"kind": "padding"})
        client.submit({"kind": "padding"})
        client.submit({"kind": "padding"}, idempotency_key="my-own-key")
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2]
    assert keys[4:] == ["my-own-key", "my-own-key"]


def test_a_422_becomes_one_line_naming_the_field() -> None:
    detail = [{"loc": ["body", "spec", "padding", "batch_size"], "msg": "Input should be greater than 0",
               "type": "greater_than"}]
    error = error_from_response(httpx.Response(422, json={"detail": detail}))
    assert str(error) == "HTTP 422: spec.padding.batch_size: Input should be greater than 0"
    assert error.status == 422
    assert "\n" not in str(error)


def test_plain_and_non_json_errors_keep_the_servers_words() -> None:
    assert describe_detail("job 4 not found") == "job 4 not found"
    error = error_from_response(httpx.Response(502, text="Bad gateway from the proxy"))
    assert str(error) == "HTTP 502: Bad gateway from the proxy"


def test_an_unreachable_server_is_one_clear_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with client_for(refuse) as client, pytest.raises(ApiError, match="cannot reach the padbench server") as caught:
        client.job(1)
    assert caught.value.status is None


def test_an_answer_outside_the_contract_is_reported_not_trusted() -> None:
    with client_for(lambda request: httpx.Response(200, json={"id": "x"})) as client, \
            pytest.raises(ApiError, match="JobOut contract"):
        client.job(1)


def test_list_passes_the_status_filter_and_page() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        page = {"items": [job_summary_body(status="failed")], "total": 1, "limit": 5, "offset": 0}
        return httpx.Response(200, json=page)

    from padbench.contract.api import JobStatus

    with client_for(handler) as client:
        page = client.jobs(status=JobStatus.failed, limit=5)
    assert page.items[0].status is JobStatus.failed
    assert dict(seen[0].url.params) == {"status": "failed", "limit": "5", "offset": "0"}


def test_wait_polls_until_a_final_status_and_shows_every_poll() -> None:
    answers = iter([job_body(status="queued"), job_body(status="running", progress=0.5),
                    job_body(status="succeeded", progress=1.0)])
    with client_for(lambda request: httpx.Response(200, json=next(answers))) as client:
        seen: list[str] = []
        job = client.wait(7, on_update=lambda j: seen.append(j.status.value), poll_s=0)
    assert job.status.value == "succeeded"
    assert seen == ["queued", "running", "succeeded"]


def test_wait_gives_up_after_its_timeout() -> None:
    with client_for(lambda request: httpx.Response(200, json=job_body(status="running"))) as client, \
            pytest.raises(ApiError, match="still running"):
        client.wait(7, poll_s=0.01, timeout_s=0.05)


def test_wait_rides_out_a_brief_outage_but_not_a_client_error() -> None:
    answers = iter([httpx.Response(503, text="restarting"), httpx.Response(200, json=job_body(status="failed"))])
    with client_for(lambda request: next(answers)) as client:
        assert client.wait(7, poll_s=0).status.value == "failed"
    with client_for(lambda request: httpx.Response(404, json={"detail": "job 7 not found"})) as client, \
            pytest.raises(ApiError, match="not found"):
        client.wait(7, poll_s=0)
