"""Every mistake a spec can hold is refused at submission, over HTTP (people who never run the CLI) and by
`padbench submit`, on SQLite and PostgreSQL: 422 naming the field in the user's words, nothing stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from padbench.cli import main
from padbench.contract.api import Capabilities
from tests.integration.conftest import LiveServer

# (spec, where the 422 points, what its message says)
REFUSALS: list[tuple[dict[str, Any], str, str]] = [
    ({"model": {"preset": "llama3"}}, "spec.model.preset", "'llama3' is not one of 'tiny', 'gpt2', 'gpt2-seed', "
                                                           "'llama-3.2-1b', "),
    ({"model": "llama3"}, "spec.model", "'llama3' is not a preset (did you mean 'llama-3.2-1b'?); write a local "
                                        "model directory as a path (./llama3) and a Hugging Face Hub model as "
                                        "org/name or hub:llama3"),
    ({"model": {"config": {"model_type": "lama", "hidden_size": 64}}}, "spec.model.config",
     "model_type 'lama' is not one padbench measures (did you mean 'llama'?)"),
    ({"device": "cpu", "batch_size": "auto"}, "spec.batch_size",
     "auto on device cpu needs probe.cpu_memory_budget_bytes"),
    ({"repeats": 3}, "spec.repeats", "unknown key (did you mean 'measurement.repeats'?)"),
    ({"experts": "eager", "model": "tiny-llama"}, "spec.experts",
     "applies only to mixtures of experts, and model 'tiny-llama' has no routed experts"),
    ({"kind": "generate", "device": "cpu", "dtype": "fp32", "attention": "sdpa", "batch_size": "auto"},
     "spec.batch_size", "auto on device cpu needs probe.cpu_memory_budget_bytes"),
    ({"trl": {"packing": True, "packing_strategy": "wrapped", "padding_free": True}}, "spec.trl",
     "padding_free restarts positions and attention at every sequence, packing_strategy wrapped runs them across "
     "documents: choose one"),
    ({"trl": {"packing": True, "pad_to_multiple_of": 64}}, "spec.trl",
     "pad_to_multiple_of rounds up the width of padded batches, but these settings run as packed"),
    ({"kind": "generate", "attention": "flash-attn"}, "spec.attention",
     "flash-attn has no KV-cache (decode) path; families with one: eager, flex, sdpa, torch-flash"),
    ({"kind": "tune", "dtype": "fp32", "tune": {"space": {"kernels": ["flash"]}}}, "spec.tune.space.kernels",
     "flash runs in bf16 or fp16 only, and dtype is fp32: no configuration could run"),
]
IDS = [location + ":" + next(iter(spec)) for spec, location, _ in REFUSALS]
NOT_THE_USERS_WORDS = ("Value error", "padding", "Extra inputs", "ModelSourceError", "UnsupportedModel")
USERS_KEYS = ("padding_free",)  # keys a spec writes, which hold such words


def in_users_words(message: str) -> bool:
    for key in USERS_KEYS:
        message = message.replace(key, "")
    return not any(words in message for words in NOT_THE_USERS_WORDS)


@pytest.mark.parametrize(("spec", "location", "message"), REFUSALS, ids=IDS)
def test_a_mistake_is_422_in_the_users_words(spec: dict[str, Any], location: str, message: str,
                                             any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user:
        response = user.post("/v1/jobs", json={"spec": spec})
        assert response.status_code == 422
        [error] = response.json()["detail"]
        assert ".".join(map(str, error["loc"])) == location
        assert message in error["msg"] and (location != "spec.model.preset" or
                                            error["msg"].endswith("(did you mean 'llama-3.2-1b'?)"))
        assert in_users_words(error["msg"]), error["msg"]
        assert user.get("/v1/jobs").json()["total"] == 0


@pytest.mark.parametrize(("spec", "location", "message"), REFUSALS, ids=IDS)
def test_padbench_submit_refuses_it_before_sending(spec: dict[str, Any], location: str, message: str,
                                                   any_live_server: LiveServer, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "my.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    arguments = ["--server", any_live_server.base_url, "--token", any_live_server.tokens["submitter"]]
    assert main(["submit", str(path), *arguments]) == 2
    err = capsys.readouterr().err
    where = location.removeprefix("spec").removeprefix(".")
    assert f"{path}: {where + ': ' if where else ''}{message}" in err
    assert in_users_words(err), err
    with any_live_server.client("submitter") as user:
        assert user.get("/v1/jobs").json()["total"] == 0


def test_transformers_attention_names_and_hub_models_are_stored_as_padbench_names(
        any_live_server: LiveServer) -> None:
    spec = {"model": "hub:gpt2", "attention": "flash_attention_2",
            "strategies": ["static", {"name": "packed", "attention": "flex_attention"}]}
    with any_live_server.client("submitter") as user:
        created = user.post("/v1/jobs", json={"spec": spec})
        assert created.status_code == 201, created.text
        stored = user.get(f"/v1/jobs/{created.json()['id']}").json()["spec"]
    assert stored["attention"] == "flash-attn" and stored["strategies"][1]["attention"] == "flex"
    assert {key: value for key, value in stored["model"].items() if value not in (None, False)} == {"hub": "gpt2"}


def test_a_generate_job_naming_a_family_without_a_kv_cache_path_is_refused_not_claimed(
        live_server: LiveServer) -> None:
    """flash-attn computes padded rows and packs but has no KV-cache path: a generate job naming it is refused at
    submission, never queued for a worker that runs flash-attn for padding jobs to claim and fail. Such a worker
    takes the padding job naming it, and generate jobs only on the families it runs for them."""
    by_kind = {"padding": ["flash-attn", "flash-attn-varlen", "sdpa", "sdpa-block-mask"],
               "generate": ["sdpa-kvcache", "sdpa"]}
    capabilities = Capabilities(device="cuda", kernels=sorted({*by_kind["padding"], *by_kind["generate"]}),
                                kernels_by_kind=by_kind, job_kinds=["padding", "generate"])
    with live_server.client("submitter") as user, live_server.client("worker") as worker:
        refused = user.post("/v1/jobs", json={"spec": {"kind": "generate", "attention": "flash_attention_2"}})
        assert refused.status_code == 422, refused.text
        [error] = refused.json()["detail"]
        assert error["loc"] == ["spec", "attention"]
        assert error["msg"].startswith("flash-attn has no KV-cache (decode) path; families with one: eager, flex")
        assert user.get("/v1/jobs").json()["total"] == 0
        submitted = [user.post("/v1/jobs", json={"spec": spec}).json()["id"] for spec in (
            {"kind": "generate", "attention": "flash"}, {"attention": "flash-attn"},
            {"kind": "generate", "attention": "sdpa"})]
        registered = worker.post("/v1/workers", json={"name": "fa2-box", "capabilities": capabilities.model_dump()})
        claims = [worker.post("/v1/leases", json={"worker_id": registered.json()["id"]}) for _ in range(3)]
    # `flash` for a generate job is torch-flash's KV-cache kernel, which this worker does not list: left queued.
    assert [claim.json()["job"]["id"] for claim in claims[:2]] == submitted[1:]
    assert claims[2].status_code == 204
