"""Jobs ended by a stand-in worker through the worker API, with results the test made rather than ran: the
dashboard's pages are then read against results whose every figure is known, in seconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from padbench.contract.api import Capabilities, LeaseOut
from padbench.contract.kinds import JOB_RESULT_ADAPTER
from padbench.contract.results import JobResultBase
from padbench.kinds.padding.contract import PaddingResult
from padbench.worker.supervisor.api import WorkerApi
from tests.acceptance.conftest import LiveServer
from tests.integration.test_server_web import noisy_result

Result = TypeVar("Result", bound=JobResultBase)


def stand_in(api: WorkerApi) -> int:
    """A CPU worker that runs nothing: the test claims and ends its jobs."""
    return api.register("stand-in", Capabilities(device="cpu", kernels=["sdpa"])).id


def claim(api: WorkerApi, worker_id: int, job_id: int) -> LeaseOut:
    lease = api.claim(worker_id)  # jobs are claimed in submission order
    assert lease is not None and lease.job.id == job_id
    return lease


def complete(api: WorkerApi, lease: LeaseOut, result: JobResultBase) -> None:
    api.complete(lease.job.id, lease.lease_token, JOB_RESULT_ADAPTER.dump_python(result, mode="json"))


def complete_by_hand(server: LiveServer, spec: dict[str, Any],
                     result_for: Callable[[dict[str, Any]], Result]) -> tuple[int, Result]:
    """One job of `spec` completed with the result `result_for` makes of the spec its lease hands over."""
    with server.client() as client:
        job_id = client.submit(spec).id
    with WorkerApi(server.url, server.tokens.worker) as api:
        lease = claim(api, stand_in(api), job_id)
        result = result_for(lease.job.spec)
        complete(api, lease, result)
    return job_id, result


def finish_by_hand(server: LiveServer, noisy_spec: dict[str, Any],
                   failing_spec: dict[str, Any]) -> tuple[int, int, PaddingResult]:
    """Two jobs ended by a stand-in worker: one with every row noisy (its result returned), one failed."""
    with server.client() as client:
        noisy, failing = client.submit(noisy_spec).id, client.submit(failing_spec).id
    with WorkerApi(server.url, server.tokens.worker) as api:
        worker = stand_in(api)
        lease = claim(api, worker, noisy)
        result = noisy_result(lease.job.spec)
        complete(api, lease, result)
        lease = claim(api, worker, failing)
        api.fail(failing, lease.lease_token, "CUDA out of memory", None)
    return noisy, failing, result


def store_by_hand(server: LiveServer, results: list[PaddingResult], baseline: str | None = None) -> list[int]:
    """Jobs of the regression tests' spec, each completed by a stand-in worker with one of `results`; the first
    named `baseline` when given, before the others are stored (so they are checked against it)."""
    from tests.regression_results import SPEC

    job_ids = []
    with WorkerApi(server.url, server.tokens.worker) as api:
        worker = stand_in(api)
        for index, result in enumerate(results):
            with server.client() as client:
                job_ids.append(client.submit(SPEC).id)
            complete(api, claim(api, worker, job_ids[-1]), result)
            if index == 0 and baseline is not None:
                with server.client() as client:
                    client.set_baseline(baseline, job_ids[0])
    return job_ids
