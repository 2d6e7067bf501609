"""Claims: atomic, exclusive under concurrency, attempts counted at claim time, capability-gated."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from padbench.contract.api import Capabilities
from padbench.contract.kinds import JOB_SPEC_ADAPTER, parse_job_spec
from padbench.contract.spec import StrategySpec
from padbench.kinds.padding.contract import PaddingJobSpec
from padbench.server import queue
from padbench.server.db.engine import Database
from padbench.server.db.workers import register_worker
from padbench.server.requirements import job_requirements, offered_capabilities
from tests.integration.conftest import CPU_KERNELS, add_worker, claim, job_row, submit


def test_claim_leases_the_oldest_job_and_counts_the_attempt(queue_db: Database) -> None:
    first, second = submit(queue_db), submit(queue_db)
    worker = add_worker(queue_db, "w1")
    job = claim(queue_db, worker)
    assert job is not None and job.id == first
    assert (job.status, job.attempts, job.worker_id) == ("running", 1, worker[0])
    assert job.lease_token and job.lease_expires_at > job.started_at
    assert claim(queue_db, worker).id == second
    assert claim(queue_db, worker) is None


def test_each_job_is_claimed_exactly_once_under_concurrency(queue_db: Database) -> None:
    job_ids = {submit(queue_db) for _ in range(40)}
    workers = [add_worker(queue_db, f"w{index}") for index in range(8)]

    def claim_until_empty(worker: tuple[int, set]) -> list[int]:
        claimed = []
        while (job := claim(queue_db, worker)) is not None:
            claimed.append(job.id)
        return claimed

    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        per_worker = list(pool.map(claim_until_empty, workers))
    everything = [job_id for claimed in per_worker for job_id in claimed]
    assert sorted(everything) == sorted(job_ids)  # every job once, none twice
    assert sum(1 for claimed in per_worker if claimed) > 1  # the claims really did interleave


def test_a_worker_only_gets_jobs_it_has_the_kernels_and_device_for(queue_db: Database) -> None:
    flash_job = submit(queue_db, {"attention": "flash", "dtype": "bf16"})
    cuda_job = submit(queue_db, {"device": "cuda", "dtype": "bf16", "attention": "torch-flash"})
    flex_job = submit(queue_db, {"device": "cpu", "dtype": "fp32", "attention": "sdpa",
                                 "strategies": ["static", StrategySpec(name="packed", attention="flex").model_dump()]})
    cpu_worker = add_worker(queue_db, "cpu", kernels=["sdpa", "eager"])
    assert claim(queue_db, cpu_worker) is None  # no flash, no cuda, no flex

    gpu_worker = add_worker(queue_db, "gpu", kernels=["sdpa", "torch-flash", "torch-flash-varlen"], device="cuda")
    assert {claim(queue_db, gpu_worker).id, claim(queue_db, gpu_worker).id} == {flash_job, cuda_job}
    flex_worker = add_worker(queue_db, "flex", kernels=CPU_KERNELS)
    assert claim(queue_db, flex_worker).id == flex_job


def test_an_attention_sweep_is_gated_on_kind_not_on_sweep_kernels(queue_db: Database) -> None:
    sweep = submit(queue_db, {"kind": "attention", "kernels": ["naive", "sdpa-flash"], "device": "cpu"})
    assert claim(queue_db, add_worker(queue_db, "padding-only", job_kinds=("padding",))) is None
    assert claim(queue_db, add_worker(queue_db, "sweeper")).id == sweep


def test_padding_defaults_leave_the_attention_to_the_worker(queue_db: Database) -> None:
    spec = PaddingJobSpec()
    assert {need for need in job_requirements(spec) if not need.startswith("cpu-work:")} == {
        "kind:padding", "attention:padding:auto"}
    job = submit(queue_db, {"device": "cpu", "dtype": "fp32"})
    assert claim(queue_db, add_worker(queue_db, "before-auto", kernels=["sdpa"])) is None
    assert claim(queue_db, add_worker(queue_db, "picks-itself", kernels=["auto", "sdpa"])).id == job


def test_a_job_gets_only_a_worker_that_runs_its_family_for_its_kind(queue_db: Database) -> None:
    """flash-attn runs padded rows and packs but has no KV-cache kernel: the worker lists it for padding only, so
    a generate job asking `flash` (a KV-cache flash kernel) waits, while its padding job and sdpa generate run."""
    generate_flash = submit(queue_db, {"kind": "generate", "attention": "flash"})
    padding_flash = submit(queue_db, {"attention": "flash-attn"})
    generate_sdpa = submit(queue_db, {"kind": "generate", "attention": "sdpa"})
    by_kind = {"padding": ["flash-attn", "flash-attn-varlen", "sdpa"], "generate": ["sdpa", "sdpa-kvcache"]}
    capabilities = Capabilities(device="cuda", kernels=["flash-attn", "sdpa"], kernels_by_kind=by_kind,
                                job_kinds=["padding", "generate"])
    with queue_db.write.begin() as session:
        worker, _ = register_worker(session, name="fa2", principal="test", capabilities=capabilities.model_dump())
    fa2 = (worker.id, offered_capabilities(capabilities))
    assert [claim(queue_db, fa2).id, claim(queue_db, fa2).id] == [padding_flash, generate_sdpa]
    assert claim(queue_db, fa2) is None and job_row(queue_db, generate_flash).status == "queued"


def test_a_job_queued_before_requirements_named_their_kind_is_still_claimed(queue_db: Database) -> None:
    spec = parse_job_spec({"device": "cpu", "dtype": "fp32", "attention": "sdpa"})
    with queue_db.write.begin() as session:
        old = queue.insert_job(session, kind=spec.kind, name=None, submitter="alice", max_attempts=3,
                               spec=JOB_SPEC_ADAPTER.dump_python(spec, mode="json"),
                               requirements={"kind:padding", "attention:sdpa"}, gpus=1)
    capabilities = Capabilities(device="cpu", kernels_by_kind={"padding": ["sdpa"]}, job_kinds=["padding"])
    with queue_db.write.begin() as session:
        worker, _ = register_worker(session, name="new", principal="test", capabilities=capabilities.model_dump())
    assert claim(queue_db, (worker.id, offered_capabilities(capabilities))).id == old
