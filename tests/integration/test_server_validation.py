"""Bad input: 422 naming the field and the reason; 413 for bodies over the limit; nothing stored is lost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import LiveServer, serve

SMALL_LIMIT = 4096


@pytest.fixture
def small_body_server(tmp_path: Path) -> Iterator[LiveServer]:
    with serve(f"sqlite:///{tmp_path / 'db.sqlite3'}", tmp_path, max_body_bytes=SMALL_LIMIT) as server:
        yield server


def locations(response) -> set[str]:  # type: ignore[no-untyped-def]
    return {".".join(str(part) for part in error["loc"]) for error in response.json()["detail"]}


def test_invalid_spec_names_the_field_and_reason(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": {"batch_size": 0, "strategies": ["static", "bogus"]}})
        assert response.status_code == 422
        assert locations(response) == {"spec.batch_size", "spec.strategies.1.name"}
        messages = " ".join(error["msg"] for error in response.json()["detail"])
        assert "must be a size from 1" in messages
        assert "'static', 'dynamic', 'binned', 'packed' or 'wrapped'" in messages


def test_cross_field_rules_and_unknown_keys_are_422(live_server: LiveServer) -> None:
    with live_server.client("submitter") as user:
        fp32_flash = user.post("/v1/jobs", json={"spec": {"dtype": "fp32", "attention": "flash"}})
        assert fp32_flash.status_code == 422 and "needs dtype bf16 or fp16" in fp32_flash.text
        typo = user.post("/v1/jobs", json={"spec": {"batch_sise": 8}})
        assert typo.status_code == 422 and locations(typo) == {"spec.batch_sise"}
        sweep = user.post("/v1/jobs", json={"spec": {"kind": "attention", "heads": 6, "kv_heads": 4}})
        assert sweep.status_code == 422 and "multiple of kv_heads" in sweep.text
        assert user.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}
                         ).status_code == 422
        assert user.post("/v1/jobs", json={}).status_code == 422
        assert user.get("/v1/jobs").json()["total"] == 0  # nothing half-stored


def test_heartbeat_progress_out_of_range_is_422(live_server: LiveServer) -> None:
    with live_server.client("worker") as gpu:
        response = gpu.post("/v1/leases/1/heartbeat", json={"lease_token": "t", "progress": 1.5})
        assert response.status_code == 422 and locations(response) == {"progress"}


def test_body_over_the_limit_is_413_declared_or_streamed(small_body_server: LiveServer) -> None:
    big = {"spec": {"name": "x" * (SMALL_LIMIT * 2)}}
    with small_body_server.client("submitter") as user:
        declared = user.post("/v1/jobs", json=big)
        assert declared.status_code == 413 and "PADBENCH_MAX_BODY_BYTES" in declared.json()["detail"]
        chunks = iter([b'{"spec": {"name": "', b"x" * SMALL_LIMIT, b"x" * SMALL_LIMIT, b'"}}'])
        streamed = user.post("/v1/jobs", content=chunks, headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        assert user.post("/v1/jobs", json={"spec": {"name": "small"}}).status_code == 201
        assert user.get("/v1/jobs").json()["total"] == 1


def test_a_mistyped_spec_key_or_value_gets_a_suggestion(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice:
        response = alice.post("/v1/jobs", json={"spec": {"dtyp": "bf16", "mode": "trainin"}})
    assert response.status_code == 422
    messages = {".".join(map(str, error["loc"])): error["msg"] for error in response.json()["detail"]}
    assert messages["spec.dtyp"].endswith("(did you mean 'dtype'?)")
    assert messages["spec.mode"].endswith("(did you mean 'training'?)")
