"""Claims against a worker's free GPUs: a job takes as many as its `gpus` says (`all`: every GPU the worker
owns), only from a worker with that many free; a worker without GPUs takes one-GPU jobs and jobs whose ranks
run on the CPU (`device: cpu`), and never a multi-GPU job meant for GPUs."""

from __future__ import annotations

from padbench.contract.api import Capabilities, GpuInfo
from padbench.server import queue
from padbench.server.db.engine import Database
from padbench.server.db.models import Job
from padbench.server.db.workers import register_worker
from padbench.server.requirements import offered_capabilities
from tests.integration.conftest import add_worker, submit

ON_GPUS = {"dtype": "bf16", "attention": "sdpa"}
ON_CPU = {"device": "cpu", "dtype": "fp32", "attention": "sdpa"}


def add_gpu_worker(database: Database, name: str, owned: int) -> tuple[int, set[str], int]:
    gpus = [GpuInfo(index=str(index), name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 2**30) for index in range(owned)]
    capabilities = Capabilities(device="cuda", gpu_name=gpus[0].name, gpus=gpus, kernels=["sdpa"],
                                job_kinds=["padding", "attention"])
    with database.write.begin() as session:
        worker, _ = register_worker(session, name=name, principal="test", capabilities=capabilities.model_dump())
    return worker.id, offered_capabilities(capabilities), owned


def claim_with(database: Database, worker: tuple[int, set[str], int], free: int) -> Job | None:
    worker_id, offered, owned = worker
    with database.write.begin() as session:
        return queue.claim_next_job(session, worker_id=worker_id, offered=offered, lease_seconds=60,
                                    gpus_owned=owned, gpus_free=free)


def test_a_two_gpu_job_waits_while_one_of_the_workers_two_gpus_is_busy(queue_db: Database) -> None:
    pair = submit(queue_db, ON_GPUS | {"gpus": 2})
    worker = add_gpu_worker(queue_db, "two-gpus", owned=2)
    assert claim_with(queue_db, worker, free=1) is None
    job = claim_with(queue_db, worker, free=2)
    assert job is not None and job.id == pair and job.gpus == 2


def test_a_one_gpu_job_behind_a_bigger_one_takes_the_free_gpu(queue_db: Database) -> None:
    pair, single = submit(queue_db, ON_GPUS | {"gpus": 2}), submit(queue_db, ON_GPUS)
    worker = add_gpu_worker(queue_db, "two-gpus", owned=2)
    assert claim_with(queue_db, worker, free=1).id == single
    assert claim_with(queue_db, worker, free=0) is None
    assert claim_with(queue_db, worker, free=2).id == pair


def test_all_takes_every_gpu_the_worker_owns(queue_db: Database) -> None:
    everything = submit(queue_db, ON_GPUS | {"gpus": "all"})
    worker = add_gpu_worker(queue_db, "four-gpus", owned=4)
    assert claim_with(queue_db, worker, free=3) is None
    job = claim_with(queue_db, worker, free=4)
    assert job is not None and job.id == everything and job.gpus == 0  # stored as ALL_GPUS


def test_a_worker_without_gpus_takes_one_gpu_jobs_and_cpu_ranks_but_never_gpu_ranks(queue_db: Database) -> None:
    on_gpus = [submit(queue_db, ON_GPUS | {"gpus": 2}), submit(queue_db, ON_GPUS | {"gpus": "all"}),
               submit(queue_db, ON_GPUS | {"gpus": 1, "device": "cuda"})]
    single, cpu_ranks, cpu_all = (submit(queue_db, ON_CPU), submit(queue_db, ON_CPU | {"gpus": 3}),
                                  submit(queue_db, ON_CPU | {"gpus": "all"}))
    cpu = add_worker(queue_db, "cpu", kernels=["sdpa"])
    claimed = [queue_claim(queue_db, cpu) for _ in range(4)]
    assert claimed == [single, cpu_ranks, cpu_all, None]
    gpu_worker = add_gpu_worker(queue_db, "two-gpus", owned=2)
    assert claim_with(queue_db, gpu_worker, free=2).id == on_gpus[0]


def queue_claim(database: Database, worker: tuple[int, set]) -> int | None:
    with database.write.begin() as session:
        job = queue.claim_next_job(session, worker_id=worker[0], offered=worker[1], lease_seconds=60)
        return None if job is None else job.id


def test_cpu_ranks_on_a_gpu_worker_hold_as_many_of_its_gpus(queue_db: Database) -> None:
    three = submit(queue_db, ON_CPU | {"gpus": 3})
    worker = add_gpu_worker(queue_db, "four-gpus", owned=4)
    assert claim_with(queue_db, worker, free=2) is None
    assert claim_with(queue_db, worker, free=3).id == three
