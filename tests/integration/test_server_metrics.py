"""`GET /metrics`: the Prometheus text format, read from the database on each scrape, on SQLite and
PostgreSQL — jobs by status, claims, failures by reason, queue-wait and run durations, workers' last
contact, the newest tokens/s per GPU, model, dtype, strategy and kernel, and the newest output tokens/s of
generate jobs."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from padbench.contract.api import Capabilities
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.server.metrics import failure_reason
from padbench.server.queue import LEASE_EXPIRED_ERROR
from tests.generate_result import generate_result
from tests.integration.conftest import LiveServer
from tests.integration.test_server_jobs import SPEC, claim, register, submit
from tests.unit.test_report_padding import sample_result


def scrape(server: LiveServer) -> dict[str, list[tuple[dict[str, str], float]]]:
    with server.client("viewer") as viewer:
        response = viewer.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    return next(v for found, v in samples[name] if all(found.get(k) == want for k, want in labels.items()))


def test_metrics_follow_the_queue(any_live_server: LiveServer) -> None:
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu:
        done, failed, _ = (submit(alice, SPEC) for _ in range(3))
        worker_id = register(gpu, "box-1")
        first = claim(gpu, worker_id)
        assert first is not None and first.job.id == done
        result = JOB_RESULT_ADAPTER.dump_python(sample_result(), mode="json")
        complete = {"lease_token": first.lease_token, "result": result}
        assert gpu.post(f"/v1/leases/{done}/complete", json=complete).status_code == 204
        second = claim(gpu, worker_id)
        assert second is not None and second.job.id == failed
        failure = {"lease_token": second.lease_token, "error": "oom: CUDA out of memory"}
        assert gpu.post(f"/v1/leases/{failed}/fail", json=failure).status_code == 204
    samples = scrape(any_live_server)
    assert value(samples, "padbench_jobs", status="queued") == 1
    assert value(samples, "padbench_jobs", status="succeeded") == 1
    assert value(samples, "padbench_jobs", status="running") == 0
    assert value(samples, "padbench_job_claims_total") == 2
    assert value(samples, "padbench_job_failures_total", reason="oom") == 1
    assert value(samples, "padbench_job_queue_wait_seconds_count") == 2
    assert value(samples, "padbench_job_run_seconds_count") == 2
    assert value(samples, "padbench_job_run_seconds_bucket", le="+Inf") == 2
    assert 0 <= value(samples, "padbench_worker_last_seen_age_seconds", worker="box-1", device="cpu") < 60
    packed = value(samples, "padbench_last_tokens_per_second", gpu="NVIDIA H200", model="gpt2-seed",
                   strategy="packed", kernel="torch-flash-varlen")
    assert packed == 1_062_000.0
    invalid = [labels for labels, _ in samples["padbench_last_tokens_per_second"] if labels["strategy"] == "binned[16]"]
    assert invalid == []  # an invalid row has no figure to report


def test_metrics_need_a_viewer_or_admin_token(live_server: LiveServer) -> None:
    with live_server.client("submitter") as alice, live_server.client("admin") as admin:
        assert alice.get("/metrics").status_code == 403
        assert admin.get("/metrics").status_code == 200


def test_failure_reasons_are_a_small_fixed_set() -> None:
    assert failure_reason("timeout: the job ran past 21600 s") == "timeout"
    assert failure_reason(LEASE_EXPIRED_ERROR) == "lease_expired"
    assert failure_reason("the job's result does not match the result contract: …") == "invalid_result"
    assert failure_reason("ValueError: something new") == "other"
    assert failure_reason(None) == "other"


def test_metrics_carry_the_newest_generate_rates(any_live_server: LiveServer) -> None:
    spec = {"kind": "generate", "device": "cuda", "dtype": "bf16", "attention": "sdpa", "name": "gen"}
    capabilities = Capabilities(device="cuda", gpu_name="NVIDIA H100", kernels=["sdpa-kvcache", "sdpa"],
                                job_kinds=["generate"]).model_dump(mode="json")
    with any_live_server.client("submitter") as alice, any_live_server.client("worker") as gpu:
        job_id = submit(alice, spec)
        lease = claim(gpu, register(gpu, "h100-box", capabilities))
        assert lease is not None and lease.job.id == job_id
        result = JOB_RESULT_ADAPTER.dump_python(generate_result(), mode="json")
        complete = {"lease_token": lease.lease_token, "result": result}
        assert gpu.post(f"/v1/leases/{job_id}/complete", json=complete).status_code == 204
    samples = scrape(any_live_server)
    assert value(samples, "padbench_last_output_tokens_per_second", gpu="NVIDIA H100", strategy="continuous",
                 kernel="sdpa-kvcache", context="") == 2400.0
    assert value(samples, "padbench_last_output_tokens_per_second", strategy="transformers-generate") == 900.0
