"""Hostile input over real HTTP, on SQLite and PostgreSQL: every case is a 4xx naming the field, never a 5xx,
and nothing already stored is lost or becomes unreadable.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from padbench.server.db.models import JobResult
from tests.integration.conftest import LiveServer, result_document, serve
from tests.integration.test_server_jobs import SPEC, claim, register, submit

TOO_BIG_ID = 2**31
HUGE_ID = 10**30


def locations(response: Any) -> set[str]:
    return {".".join(str(part) for part in error["loc"]) for error in response.json()["detail"]}


def test_ids_past_the_integer_range_are_422(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as gpu:
        for job_id in (TOO_BIG_ID, HUGE_ID):
            for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/results"):
                assert user.get(path).status_code == 422, path
            assert user.post(f"/v1/jobs/{job_id}/cancel").status_code == 422
            beat = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": "t"})
            assert beat.status_code == 422 and locations(beat) == {"path.job_id"}
            lease = gpu.post("/v1/leases", json={"worker_id": job_id})
            assert lease.status_code == 422 and locations(lease) == {"worker_id"}
        assert user.get("/v1/jobs", params={"offset": HUGE_ID}).status_code == 422


def test_nul_bytes_are_422_not_a_database_error(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as gpu:
        named = gpu.post("/v1/workers", json={"name": "box\x00", "capabilities": {"device": "cpu"}})
        assert named.status_code == 422 and locations(named) == {"name"}
        capable = gpu.post("/v1/workers", json={"name": "box", "capabilities": {"device": "cpu",
                                                                                  "kernels": ["sdpa\x00"]}})
        assert capable.status_code == 422 and locations(capable) == {"capabilities.kernels.0"}
        job_id = submit(user)
        claim(gpu, register(gpu, "box"))
        beat = gpu.post(f"/v1/leases/{job_id}/heartbeat", json={"lease_token": "x\x00y"})
        assert beat.status_code == 422 and locations(beat) == {"lease_token"}
        spec = user.post("/v1/jobs", json={"spec": {**SPEC, "name": "a\x00b"}})
        assert spec.status_code == 422 and locations(spec) == {"spec.name"}


def test_a_name_longer_than_its_column_is_422(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {**SPEC, "name": "n" * 201}})
        assert response.status_code == 422 and locations(response) == {"spec.name"}
        assert user.get("/v1/jobs").json()["total"] == 0


def post_with_literal(http: httpx.Client, path: str, document: dict[str, Any], literal: str) -> httpx.Response:
    """POST `document` with every "__literal__" string replaced by `literal` (NaN and Infinity are not JSON,
    so no encoder writes them, but Python's and JavaScript's lenient encoders do)."""
    body = json.dumps(document).replace('"__literal__"', literal)
    return http.post(path, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused_in_specs_and_results(live_server: LiveServer, value: str) -> None:
    with live_server.client("submitter") as user, live_server.client("worker") as gpu:
        sweep = {"spec": {"kind": "attention", "cell_timeout_s": "__literal__"}}
        spec = post_with_literal(user, "/v1/jobs", sweep, value)
        assert spec.status_code == 422 and locations(spec) == {"spec.cell_timeout_s"}
        job_id = submit(user)
        lease = claim(gpu, register(gpu, "w"))
        assert lease is not None
        document = {**result_document(SPEC), "flops_per_token": "__literal__"}
        body = {"lease_token": lease.lease_token, "result": document}
        done = post_with_literal(gpu, f"/v1/leases/{job_id}/complete", body, value)
        assert done.status_code == 422 and locations(done) == {"result.flops_per_token"}


def test_a_nan_stored_before_results_refused_it_reads_as_null(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as gpu:
        job_id = submit(user)
        lease = claim(gpu, register(gpu, "w"))
        assert lease is not None
        document = result_document(SPEC)
        done = gpu.post(f"/v1/leases/{job_id}/complete", json={"lease_token": lease.lease_token, "result": document})
        assert done.status_code == 204
        stored = {**document, "flops_per_token": math.nan}
        if any_live_server.database.engine.dialect.name == "postgresql":
            stored["flops_per_token"] = None  # PostgreSQL json refuses NaN outright; SQLite stored it
        with any_live_server.database.write.begin() as session:
            session.execute(update(JobResult).where(JobResult.job_id == job_id).values(result=stored))
        read = user.get(f"/v1/jobs/{job_id}/results")
        assert read.status_code == 200 and read.json()["flops_per_token"] is None


def test_the_job_list_holds_summaries_without_specs(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        job_id = submit(user)
        page = user.get("/v1/jobs").json()
        assert [item["id"] for item in page["items"]] == [job_id]
        assert "spec" not in page["items"][0] and "results" not in page["items"][0]
        assert user.get(f"/v1/jobs/{job_id}").json()["spec"]["name"] == SPEC["name"]


def test_lease_calls_from_another_workers_token_are_403(any_live_server: LiveServer) -> None:
    with (any_live_server.client("submitter") as user, any_live_server.client("worker") as owner,
          any_live_server.client("worker2") as intruder):
        job_id = submit(user)
        lease = claim(owner, register(owner, "w1"))
        assert lease is not None
        token = {"lease_token": lease.lease_token}
        assert intruder.post(f"/v1/leases/{job_id}/heartbeat", json={**token, "progress": 0.9}).status_code == 403
        assert intruder.post(f"/v1/leases/{job_id}/fail", json={**token, "error": "x"}).status_code == 403
        assert intruder.post(f"/v1/leases/{job_id}/release", json=token).status_code == 403
        document = result_document(SPEC)
        stolen = intruder.post(f"/v1/leases/{job_id}/complete", json={**token, "result": document})
        assert stolen.status_code == 403
        job = user.get(f"/v1/jobs/{job_id}").json()
        assert (job["status"], job["progress"]) == ("running", None)
        assert owner.post(f"/v1/leases/{job_id}/heartbeat", json=token).status_code == 200


@pytest.mark.parametrize(("field", "name"), [
    ("source", "/etc/shadow"), ("source", "~/.ssh/id_rsa"), ("source", "data/../../etc/passwd"),
    ("source", "*.txt"), ("tokenizer", "/root/tokenizer"), ("tokenizer", "../tok"),
])
def test_file_names_leaving_the_worker_roots_are_422_naming_the_field(live_server: LiveServer, field: str,
                                                                     name: str) -> None:
    data = {"source": "corpus.txt", "tokenizer": "bert-base-uncased", field: name}
    with live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {**SPEC, "data": data}})
        assert response.status_code == 422 and locations(response) == {f"spec.data.{field}"}
        absolute_model = user.post("/v1/jobs", json={"spec": {**SPEC, "model": {"path": "/models/x"}}})
        assert absolute_model.status_code == 422 and locations(absolute_model) == {"spec.model.path"}
        fine = user.post("/v1/jobs", json={"spec": {**SPEC, "data": {"source": "wiki/train.txt",
                                                                     "tokenizer": "bert-base-uncased"}}})
        assert fine.status_code == 201


@pytest.mark.parametrize("source", ["hf:/etc", "hf:../..", "hf:~", "hf:../../etc/passwd", "hf:/tmp:default:train",
                                    "hf:org/../../etc", "hf:json", "hf:name:../x"])
def test_a_hub_data_source_that_could_read_local_files_is_422_naming_the_field(any_live_server: LiveServer,
                                                                              source: str) -> None:
    # `hf:` sources skip the roots check, so only the Hub's own names are let through.
    data = {"source": source, "tokenizer": "bert-base-uncased"}
    with any_live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {**SPEC, "data": data}})
        assert response.status_code == 422 and locations(response) == {"spec.data.source"}
        assert user.get("/v1/jobs").json()["total"] == 0
        hub = user.post("/v1/jobs", json={"spec": {**SPEC, "data": {**data, "source": "hf:Salesforce/wikitext"}}})
        assert hub.status_code == 201


def test_a_model_written_as_a_url_is_422_naming_the_field(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {**SPEC, "model": "file:///etc"}})
        assert response.status_code == 422 and locations(response) == {"spec.model.path"}
        assert "URLs are not accepted; name a local path" in response.json()["detail"][0]["msg"]
        assert user.get("/v1/jobs").json()["total"] == 0


def test_a_job_over_the_cost_limits_is_422(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    with serve(url, tmp_path, max_job_tokens=1000) as server, server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": SPEC})
        assert response.status_code == 422 and "PADBENCH_MAX_JOB_TOKENS" in response.text
        assert user.get("/v1/jobs").json()["total"] == 0
