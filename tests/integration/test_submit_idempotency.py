"""Idempotent submits: a retried submit with the same `Idempotency-Key` gets the job the first attempt created,
never a second one — also when the retries race — on SQLite and PostgreSQL.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from padbench.contract.kinds import JOB_SPEC_ADAPTER, parse_job_spec
from padbench.server import queue
from padbench.server.db.engine import Database
from padbench.server.db.models import Job, JobRequirement
from padbench.server.requirements import job_requirements
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC

KEY = "c0ffee00-1111-4222-8333-444455556666"


def insert(database: Database, key: str | None, submitter: str = "alice") -> int | None:
    spec = parse_job_spec(SPEC)
    with database.write.begin() as session:
        return queue.insert_job(session, kind=spec.kind, name=spec.name, submitter=submitter, max_attempts=3,
                                spec=JOB_SPEC_ADAPTER.dump_python(spec, mode="json"),
                                requirements=job_requirements(spec), idempotency_key=key)


def count(database: Database, table: Any) -> int:
    with database.read() as session:
        return session.scalar(select(func.count()).select_from(table)) or 0


def test_a_known_key_inserts_nothing_and_keys_are_per_submitter(queue_db: Database) -> None:
    first = insert(queue_db, KEY)
    assert first is not None
    requirements = count(queue_db, JobRequirement)
    assert insert(queue_db, KEY) is None
    assert (count(queue_db, Job), count(queue_db, JobRequirement)) == (1, requirements)
    assert insert(queue_db, KEY, submitter="bob") not in (None, first)  # another submitter's key is another job
    assert None not in (insert(queue_db, None), insert(queue_db, None))  # no key: always a new job
    assert count(queue_db, Job) == 4


def post(http: httpx.Client, key: str, spec: dict[str, Any] = SPEC) -> httpx.Response:
    return http.post("/v1/jobs", json={"spec": spec}, headers={"Idempotency-Key": key})


def test_a_retry_with_the_same_key_answers_200_with_the_same_job(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("submitter2") as bob:
        first = post(alice, KEY)
        assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
        retry = post(alice, KEY)
        assert retry.status_code == 200 and retry.headers["Idempotent-Replayed"] == "true"
        assert retry.json() == first.json() == {"id": first.json()["id"], "status": "queued"}
        assert post(bob, KEY).status_code == 201
        assert alice.get("/v1/jobs").json()["total"] == 1


def test_racing_retries_create_one_job(any_live_server: LiveServer) -> None:
    def submit_once(_: int) -> httpx.Response:
        with any_live_server.client("submitter") as alice:
            return post(alice, KEY)

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(submit_once, range(8)))
    assert sorted(answer.status_code for answer in answers) == [200] * 7 + [201]
    assert len({answer.json()["id"] for answer in answers}) == 1
    with any_live_server.client("submitter") as alice:
        assert alice.get("/v1/jobs").json()["total"] == 1


def test_the_same_key_with_another_spec_is_422_naming_the_job(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice:
        job_id = post(alice, KEY).json()["id"]
        other = post(alice, KEY, {**SPEC, "name": "another"})
        assert other.status_code == 422
        [error] = other.json()["detail"]
        assert error["loc"] == ["header", "Idempotency-Key"]
        assert error["msg"].startswith(f"already used for job {job_id} with a different spec")
        assert alice.get("/v1/jobs").json()["total"] == 1


@pytest.mark.parametrize(("key", "reason"), [
    ("", "at least 1 character"), ("k" * 201, "at most 200 characters"), ("tab\there", "printable ASCII"),
])
def test_a_malformed_key_is_422_naming_the_header(live_server: LiveServer, key: str, reason: str) -> None:
    with live_server.client("submitter") as alice:
        response = post(alice, key)
        assert response.status_code == 422
        [error] = response.json()["detail"]
        assert error["loc"] == ["header", "Idempotency-Key"] and reason in error["msg"]
        assert post(alice, "k" * 200).status_code == 201
