"""A model no worker in contact could hold is refused at submit, naming the model and the bytes, over real HTTP
on SQLite and PostgreSQL; with no worker in contact, or a model that might fit, the job is queued as before."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import register

# About 1e14 parameters by the lower bound: 1,000 layers of width 100,000 and a 400,000-wide MLP.
HUGE = {"model_type": "llama", "hidden_size": 100_000, "intermediate_size": 400_000, "num_hidden_layers": 1000,
        "num_attention_heads": 100, "vocab_size": 32_000}
CPU_WORKER = {"device": "cpu", "kernels": ["sdpa"], "job_memory_bytes": 16 * 2**30}
H100S = {"device": "cuda", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_memory_bytes": 80 * 10**9, "kernels": ["sdpa"],
         "gpus": [{"index": str(index), "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 80 * 10**9}
                  for index in range(8)]}


def spec(model: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One short sequence once: what decides here is the model's size, not the job's FLOPs."""
    return {"model": {"config": model}, "attention": "sdpa", "dtype": "bf16", "strategies": ["packed"],
            "data": {"num_samples": 1, "max_length": 16}, "measurement": {"repeats": 1}, **fields}


def test_a_model_no_worker_in_contact_could_hold_is_refused_at_submit(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as user, any_live_server.client("worker") as worker:
        assert user.post("/v1/jobs", json={"spec": spec(HUGE)}).status_code == 201  # no worker yet: it waits
        register(worker, "cpu-box", CPU_WORKER)
        refused = user.post("/v1/jobs", json={"spec": spec(HUGE)})
        assert refused.status_code == 422, refused.text
        [error] = refused.json()["detail"]
        assert error["loc"] == ["spec", "model"]
        assert error["msg"].startswith("the model has at least 1e+14 parameters") and "16.0 GiB" in error["msg"]
        tiny = {**HUGE, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
        assert user.post("/v1/jobs", json={"spec": spec(tiny)}).status_code == 201
        assert user.get("/v1/jobs").json()["total"] == 2


def test_training_needs_its_gradients_and_optimizer_state_too(live_server: LiveServer) -> None:
    # About 35 B parameters: 70 GB of bf16 weights fit eight H100s; ×4 for training (280 GB) fits too, 1,200 GB not.
    large = {**HUGE, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 60}
    with live_server.client("submitter") as user, live_server.client("worker") as worker:
        register(worker, "h100s", H100S)
        assert user.post("/v1/jobs", json={"spec": spec(large)}).status_code == 201
        assert user.post("/v1/jobs", json={"spec": spec(large, mode="training", gpus=8)}).status_code == 201
        deep = {**large, "num_hidden_layers": 240}
        assert user.post("/v1/jobs", json={"spec": spec(deep)}).status_code == 201  # 280 GB of weights: fits
        refused = user.post("/v1/jobs", json={"spec": spec(deep, mode="training", gpus=8)})
        assert refused.status_code == 422 and "weights, gradients and AdamW state" in refused.text
